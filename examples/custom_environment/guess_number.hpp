#pragma once
/// An example environment in a plugin: `guess_number`. The task's label is a secret integer; the
/// model guesses (the last number of its reply), the environment answers "higher" or "lower" as
/// a user's message, and the episode is done when the guess is right (reward 1) — a multi-turn
/// environment without tools. Options: {"penalty": p} takes p off the reward per wrong guess
/// (default 0).

#include <memory>

#include "actors/environment/environment.hpp"

namespace milesrt::examples {

std::unique_ptr<environment::environment> make_guess_number();

}  // namespace milesrt::examples
