#pragma once
/// The session_server actor: the sessions (agent::session_table), the HTTP server's routes, the
/// generation service it uses, and its role as a source whose items are ended session groups.
///
/// Admission: the driver's `produce(n)` is answered once n groups have ended (the answer waits,
/// under the actor's deadline). While it waits, up to n groups are admitted: a turn of a session
/// whose group is admitted always runs; a turn that would start another group runs only while
/// fewer than n are admitted or ended, else it is answered 429 with Retry-After. Between the
/// driver's asks (it trains, say) no new group starts.

#include <caf/fwd.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "actors/lib/agent/reply_parser.hpp"
#include "actors/lib/agent/session_table.hpp"
#include "runtime/http/http_server.hpp"

namespace milesrt::llm {
class tokenizer;
class chat_template;
}  // namespace milesrt::llm

namespace milesrt::session_server {

/// What the actor is made with (the kind's params, the loaded tokenizer and template).
struct server_config {
  std::shared_ptr<const llm::tokenizer> tok;
  std::shared_ptr<const llm::chat_template> tmpl;
  agent::session_table_limits limits;
  std::string model_name = "milesrt";
  /// "http://HOST:PORT", the sessions' base URLs start with it.
  std::string url;
  uint32_t max_new_tokens = 256;
  /// Every turn's sampling temperature (the trainer's).
  double temperature = 1.0;
  uint32_t retry_after_seconds = 1;
  std::chrono::milliseconds generate_deadline{600000};
  uint64_t seed = 0;
  /// A group with a session ended without a reward goes out on "unscored", for the graph's
  /// reward actor (else such a session's reward is 0).
  bool score_unrewarded = false;
};

/// Spawns the actor; it adds its routes to `http` (bound, not started) and starts it. The actor
/// answers produce, snapshot, restore and the runtime's `uses`.
caf::actor spawn_session_server(caf::actor_system& sys, server_config config,
                                std::shared_ptr<runtime::http_server> http);

}  // namespace milesrt::session_server
