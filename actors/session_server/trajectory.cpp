#include "actors/session_server/trajectory.hpp"

#include <algorithm>
#include <caf/make_message.hpp>

#include "actors/lib/agent/reply_parser.hpp"
#include "actors/lib/agent/trajectory.hpp"

namespace milesrt::session_server {

namespace {

llm::sample_msg to_sample(agent::trajectory t, double reward) {
  llm::sample_msg m;
  m.reward = static_cast<float>(reward);
  m.finish_reason = "stop";
  m.prompt = std::move(t.prompt);
  m.output = std::move(t.output);
  m.logprobs = std::move(t.logprobs);
  m.versions = std::move(t.versions);
  m.mask = std::move(t.mask);
  return m;
}

}  // namespace

llm::sample_msg to_sample(const agent::session_tokens& tokens, double reward) {
  return to_sample(agent::to_trajectory(tokens), reward);
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
    auto tr = agent::to_trajectory(t);
    const uint64_t t_lo = tr.min_version, t_hi = tr.max_version;
    auto m = to_sample(std::move(tr), s.reward.value_or(0.0));
    if (m.output.empty()) {
      ++empty;
      continue;
    }
    if (tok) m.text = last_turn_text(t, *tok);
    lo = std::min(lo, t_lo);  // a non-empty output has a sampled token
    hi = std::max(hi, t_hi);
    g.samples.push_back(std::move(m));
  }
  runtime::envelope e;
  e.min_version = lo == UINT64_MAX ? fallback : lo;
  e.max_version = lo == UINT64_MAX ? fallback : hi;
  e.payload = caf::make_message(std::move(g));
  return e;
}

}  // namespace milesrt::session_server
