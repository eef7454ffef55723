#pragma once
/// A session's tokens as one trajectory to train on: the prompt is everything before the first
/// token the model sampled, the output the rest, the model's and the environment's tokens
/// interleaved, with a mask that marks the model's (the trainer's loss covers only those).

#include <cstdint>
#include <vector>

#include "actors/lib/agent/session.hpp"

namespace milesrt::agent {

/// One trajectory, per output token: its log-prob (0 for the environment's), the weight version
/// (an environment token takes the version of the sampled token before it) and its mask (1
/// sampled, 0 the environment's).
struct trajectory {
  std::vector<int64_t> prompt;
  std::vector<int64_t> output;
  std::vector<float> logprobs;
  std::vector<uint64_t> versions;
  std::vector<uint8_t> mask;
  /// The oldest and newest version of the sampled tokens (0, 0 when none was sampled).
  uint64_t min_version = 0, max_version = 0;
};

/// `tokens` split at its first sampled token; a sequence with no sampled token gives an empty
/// output (and the whole sequence as prompt).
trajectory to_trajectory(const session_tokens& tokens);

}  // namespace milesrt::agent
