#pragma once
/// How episodes ended and what they did, summed into the metrics the environment kind reports
/// (pure functions: environment_actor.cpp fills them, the tests check them).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace milesrt::environment {

/// Why an episode ended.
enum class end_reason : uint8_t {
  done,    ///< the environment said so
  turns,   ///< maxTurns model turns
  tokens,  ///< maxTokens tokens (or no room left for a reply)
  time,    ///< maxSeconds since the episode began (looked at between turns)
  render,  ///< the chat template cannot render the conversation so that the episode's tokens
           ///< stay exact (a reply the template writes otherwise than the model did)
};

/// Every reason, in the order the metrics list them.
inline constexpr end_reason kEndReasons[] = {
    end_reason::done, end_reason::turns, end_reason::tokens, end_reason::time, end_reason::render};

const char* to_string(end_reason r);

/// One ended episode, as counted.
struct episode_outcome {
  double reward = 0;
  end_reason reason = end_reason::done;
  uint32_t turns = 0, tokens = 0;
  uint32_t tool_calls = 0, tool_errors = 0, malformed = 0;
};

/// The figures of a set of episodes under `prefix` ("env_", "eval_env_"): `success` (reward >
/// 0), `reward_mean`, `tool_call_rate` (episodes with a tool call), `tool_calls_per_episode`,
/// `tool_call_success` (calls the environment ran without error, of all calls; absent without
/// calls), `turns_mean`, `tokens_mean`, and per reason `ended_<reason>` (the share of episodes).
std::map<std::string, double> summarize(const std::vector<episode_outcome>& episodes,
                                        const std::string& prefix);

}  // namespace milesrt::environment
