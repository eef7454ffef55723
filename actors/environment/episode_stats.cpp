#include "actors/environment/episode_stats.hpp"

namespace milesrt::environment {

const char* to_string(end_reason r) {
  switch (r) {
    case end_reason::done:
      return "done";
    case end_reason::turns:
      return "turns";
    case end_reason::tokens:
      return "tokens";
    case end_reason::time:
      return "time";
    case end_reason::render:
      return "render";
  }
  return "?";
}

std::map<std::string, double> summarize(const std::vector<episode_outcome>& episodes,
                                        const std::string& prefix) {
  std::map<std::string, double> m;
  if (episodes.empty()) return m;
  const double n = double(episodes.size());
  double success = 0, reward = 0, with_tool = 0, calls = 0, errors = 0, turns = 0, tokens = 0;
  std::map<end_reason, double> ended;
  for (const auto& e : episodes) {
    success += e.reward > 0 ? 1 : 0;
    reward += e.reward;
    with_tool += e.tool_calls > 0 ? 1 : 0;
    calls += e.tool_calls;
    errors += e.tool_errors;
    turns += e.turns;
    tokens += e.tokens;
    ended[e.reason] += 1;
  }
  m[prefix + "success"] = success / n;
  m[prefix + "reward_mean"] = reward / n;
  m[prefix + "tool_call_rate"] = with_tool / n;
  m[prefix + "tool_calls_per_episode"] = calls / n;
  if (calls > 0) m[prefix + "tool_call_success"] = (calls - errors) / calls;
  m[prefix + "turns_mean"] = turns / n;
  m[prefix + "tokens_mean"] = tokens / n;
  for (auto r : kEndReasons) m[prefix + "ended_" + to_string(r)] = ended[r] / n;
  return m;
}

}  // namespace milesrt::environment
