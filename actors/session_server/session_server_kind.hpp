#pragma once
/// The `session_server` actor kind: an OpenAI-compatible, token-in-token-out HTTP server of agent
/// sessions (docs/sessions.md). A source: its items are the groups of sessions that ended, as
/// scored sample groups whose samples carry a mask of the tokens the model sampled. It samples
/// through the service its `generate` port uses (a rollout's). Its params are
/// schemas/session_server.capnp's SessionServerParams.

#include "runtime/core/kind.hpp"

namespace milesrt::session_server {

/// Adds the `session_server` kind and its message types to the registry.
void register_session_server_kind(runtime::kind_registry& registry);

}  // namespace milesrt::session_server
