#pragma once
/// An ended group of agent sessions as it goes down the graph: one sample per session, whose
/// output is everything after the first sampled token's prompt, sampled and environment tokens
/// interleaved, with a mask that marks which the model sampled (the trainer's loss covers only
/// those). Pure functions; the session_server actor calls them.

#include <cstdint>

#include "actors/lib/agent/session_table.hpp"
#include "actors/lib/llm/messages.hpp"
#include "runtime/core/messages.hpp"

namespace milesrt::session_server {

/// One session's tokens as a sample: `prompt` the tokens before its first sampled one, `output`
/// the rest, with per-token log-probs (0 for the environment's), versions (an environment token
/// takes the version of the sampled token before it) and `mask`; `reward` as given (0 without).
/// A session with no sampled token gives an empty output.
llm::sample_msg to_sample(const agent::session_tokens& tokens, double reward);

/// A finished group as the envelope of a sample_group (id `group_id`, label the group's name):
/// its sessions with at least one sampled token, in the order opened; the envelope's versions
/// span the sampled tokens' (`fallback` when none). Sessions without a sampled token are left
/// out and counted in `empty`.
runtime::envelope to_envelope(agent::finished_group& group, uint64_t group_id, uint64_t fallback,
                              uint64_t& empty);

}  // namespace milesrt::session_server
