#include "actors/lib/agent/trajectory.hpp"

#include <algorithm>

namespace milesrt::agent {

trajectory to_trajectory(const session_tokens& tokens) {
  trajectory t;
  size_t first = tokens.size();
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens.origins[i] == token_origin::sampled) {
      first = i;
      break;
    }
  }
  t.prompt.assign(tokens.ids.begin(), tokens.ids.begin() + static_cast<std::ptrdiff_t>(first));
  if (first == tokens.size()) return t;
  uint64_t version = tokens.versions[first];
  t.min_version = t.max_version = version;
  for (size_t i = first; i < tokens.size(); ++i) {
    const bool sampled = tokens.origins[i] == token_origin::sampled;
    if (sampled) {
      version = tokens.versions[i];
      t.min_version = std::min(t.min_version, version);
      t.max_version = std::max(t.max_version, version);
    }
    t.output.push_back(tokens.ids[i]);
    t.logprobs.push_back(sampled ? tokens.logprobs[i] : 0.0f);
    t.versions.push_back(version);
    t.mask.push_back(sampled ? 1 : 0);
  }
  return t;
}

}  // namespace milesrt::agent
