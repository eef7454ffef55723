#include "actors/session_server/trajectory.hpp"

#include <algorithm>
#include <caf/make_message.hpp>

#include "actors/lib/agent/reply_parser.hpp"

namespace milesrt::session_server {

llm::sample_msg to_sample(const agent::session_tokens& tokens, double reward) {
  llm::sample_msg m;
  m.reward = static_cast<float>(reward);
  m.finish_reason = "stop";
  size_t first = tokens.size();
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens.origins[i] == agent::token_origin::sampled) {
      first = i;
      break;
    }
  }
  m.prompt.assign(tokens.ids.begin(), tokens.ids.begin() + static_cast<std::ptrdiff_t>(first));
  uint64_t version = first < tokens.size() ? tokens.versions[first] : 0;
  for (size_t i = first; i < tokens.size(); ++i) {
    const bool sampled = tokens.origins[i] == agent::token_origin::sampled;
    if (sampled) version = tokens.versions[i];
    m.output.push_back(tokens.ids[i]);
    m.logprobs.push_back(sampled ? tokens.logprobs[i] : 0.0f);
    m.versions.push_back(version);
    m.mask.push_back(sampled ? 1 : 0);
  }
  return m;
}

std::string last_turn_text(const agent::session_tokens& tokens, const llm::tokenizer& tok) {
  size_t end = tokens.size();
  while (end > 0 && tokens.origins[end - 1] != agent::token_origin::sampled) --end;
  size_t begin = end;
  while (begin > 0 && tokens.origins[begin - 1] == agent::token_origin::sampled) --begin;
  return agent::reply_text(tok,
                           std::vector<llm::token_id>(tokens.ids.begin() + std::ptrdiff_t(begin),
                                                      tokens.ids.begin() + std::ptrdiff_t(end)));
}

std::string group_label(const agent::finished_group& group) {
  for (const auto& s : group.sessions) {
    if (s.metadata.is_object() && s.metadata.contains("label") && s.metadata["label"].is_string())
      return s.metadata["label"].get<std::string>();
  }
  return group.group;
}

bool has_unrewarded(const agent::finished_group& group) {
  for (const auto& s : group.sessions) {
    if (s.tokens && !s.reward) return true;
  }
  return false;
}

runtime::envelope to_envelope(agent::finished_group& group, uint64_t group_id, uint64_t fallback,
                              uint64_t& empty, const llm::tokenizer* tok) {
  llm::sample_group g;
  g.group_id = group_id;
  g.label = group_label(group);
  uint64_t lo = UINT64_MAX, hi = 0;
  for (auto& s : group.sessions) {
    if (!s.tokens) continue;
    const auto& t = s.tokens->tokens();
    auto m = to_sample(t, s.reward.value_or(0.0));
    if (m.output.empty()) {
      ++empty;
      continue;
    }
    if (tok) m.text = last_turn_text(t, *tok);
    for (size_t i = 0; i < t.size(); ++i) {
      if (t.origins[i] != agent::token_origin::sampled) continue;
      lo = std::min(lo, t.versions[i]);
      hi = std::max(hi, t.versions[i]);
    }
    g.samples.push_back(std::move(m));
  }
  runtime::envelope e;
  e.min_version = lo == UINT64_MAX ? fallback : lo;
  e.max_version = lo == UINT64_MAX ? fallback : hi;
  e.payload = caf::make_message(std::move(g));
  return e;
}

}  // namespace milesrt::session_server
