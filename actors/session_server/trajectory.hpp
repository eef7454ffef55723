#pragma once
/// An ended group of agent sessions as it goes down the graph: one sample per session, whose
/// output is everything after the first sampled token's prompt, sampled and environment tokens
/// interleaved, with a mask that marks which the model sampled (the trainer's loss covers only
/// those). Pure functions; the session_server actor calls them.

#include <cstdint>

#include "actors/lib/agent/session_table.hpp"
#include "actors/lib/llm/messages.hpp"
#include "runtime/core/messages.hpp"

namespace milesrt::llm {
class tokenizer;
}

namespace milesrt::session_server {

/// One session's tokens as a sample: `prompt` the tokens before its first sampled one, `output`
/// the rest, with per-token log-probs (0 for the environment's), versions (an environment token
/// takes the version of the sampled token before it) and `mask`; `reward` as given (0 without).
/// A session with no sampled token gives an empty output.
llm::sample_msg to_sample(const agent::session_tokens& tokens, double reward);

/// The text a reward actor judges of a session: its last turn, the last run of sampled tokens,
/// decoded (end-of-turn tokens dropped); "" when none was sampled.
std::string last_turn_text(const agent::session_tokens& tokens, const llm::tokenizer& tok);

/// The label a reward actor judges a group's sessions against: the first `metadata.label` (a
/// string) among its sessions, else the group's name.
std::string group_label(const agent::finished_group& group);

/// Whether a session of the group ended without a reward (the graph's reward actor scores it).
bool has_unrewarded(const agent::finished_group& group);

/// A finished group as the envelope of a sample_group (id `group_id`, label group_label): its
/// sessions with at least one sampled token, in the order opened, each with its last turn's text
/// when `tok` is given; the envelope's versions span the sampled tokens' (`fallback` when none).
/// Sessions without a sampled token are left out and counted in `empty`.
runtime::envelope to_envelope(agent::finished_group& group, uint64_t group_id, uint64_t fallback,
                              uint64_t& empty, const llm::tokenizer* tok = nullptr);

}  // namespace milesrt::session_server
