#pragma once
/// The session_server actor's state and the functions its two files share (internal to
/// actors/session_server/): session_server.cpp (the actor, admission, the driver's produce)
/// and session_routes.cpp (the HTTP routes).

#include <caf/all.hpp>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "actors/lib/serving/generate_messages.hpp"
#include "actors/session_server/reply_stream.hpp"
#include "actors/session_server/session_server.hpp"
#include "runtime/core/messages.hpp"
#include "runtime/core/services.hpp"

namespace milesrt::session_server {

using json = nlohmann::ordered_json;
using clock = std::chrono::steady_clock;

/// A turn's client left before its answer (sent from the HTTP server's I/O thread).
using turn_gone_atom = caf::atom_constant<caf::atom("turn_gone")>;

/// The routes, as the actor dispatches them.
enum class route_kind : uint8_t { open, get, remove, end, chat, models, generate, health };

/// One HTTP request waiting for the actor.
struct http_call {
  route_kind route = route_kind::health;
  runtime::http_request request;
  runtime::http_responder responder;
};

/// Calls from the HTTP server's I/O thread to the actor: a call waits here, its number travels
/// to the actor as a message (the call itself is no CAF message type).
class call_inbox {
 public:
  uint64_t put(http_call call) {
    std::lock_guard<std::mutex> lock(m_);
    calls_.emplace(++next_, std::move(call));
    return next_;
  }
  std::optional<http_call> take(uint64_t id) {
    std::lock_guard<std::mutex> lock(m_);
    auto it = calls_.find(id);
    if (it == calls_.end()) return std::nullopt;
    http_call c = std::move(it->second);
    calls_.erase(it);
    return c;
  }

 private:
  std::mutex m_;
  std::map<uint64_t, http_call> calls_;
  uint64_t next_ = 0;
};

/// What the actor counts (each produce answer reports them as metrics).
struct server_counts {
  uint64_t turns = 0, turns_discarded = 0, turns_refused = 0, generate_failures = 0;
  uint64_t tool_calls = 0, tool_calls_malformed = 0, empty_sessions = 0, empty_groups = 0;
  /// Turns whose client left before the answer (taken back at once).
  uint64_t turns_abandoned = 0;
  uint64_t groups_out = 0;
  /// Groups sent to the graph's reward actor (a session ended without a reward).
  uint64_t groups_unscored = 0;
};

/// A chat turn streamed as it is sampled: its answer, the tokens so far, how to read them.
struct streaming_turn {
  std::shared_ptr<reply_stream> out;
  std::vector<llm::token_id> ids;
  bool think_open = false;  ///< the prompt opened a `<think>` block
  std::vector<std::string> stop;
};

struct server_state {
  server_config cfg;
  std::unique_ptr<agent::session_table> table;
  std::shared_ptr<runtime::http_server> http;
  std::shared_ptr<call_inbox> inbox;
  runtime::service_links links;
  agent::tool_call_format format = agent::tool_call_format::none;
  /// The driver's ask: answered once `count` groups are ready.
  struct ask {
    caf::response_promise promise;
    uint64_t count = 0;
  };
  std::optional<ask> produce;
  std::map<std::string, std::string> group_of;           ///< session id -> group key
  std::map<std::string, std::set<std::string>> members;  ///< group key -> session ids
  std::set<std::string> admitted;  ///< groups under way that count against the driver's asks
  std::map<std::string, std::string> labels;  ///< group key -> its sessions' metadata.label
  /// Ended groups not yet handed to the driver, each on its port ("groups" or "unscored").
  std::deque<runtime::output> ready;
  /// Sessions with a turn in flight: the turn's number, and where the session stood before it
  /// (a turn that fails, or whose client leaves, is taken back to there).
  struct turn_in_flight {
    uint64_t number = 0;
    agent::session_mark before;
  };
  std::map<std::string, turn_in_flight> busy;
  uint64_t next_turn = 0;
  std::map<uint64_t, streaming_turn> streams;  ///< by the generation request's stream id
  uint64_t next_stream = 0;
  uint64_t next_group = 0;
  uint64_t last_version = 0;  ///< the newest weight version a turn was sampled under
  server_counts counts;
};

using server_actor = caf::stateful_actor<server_state>*;

// session_server.cpp
/// Whether a turn of `session` may run now: its group is admitted, or is admitted by it.
bool admit_turn(server_actor self, const std::string& session);
/// Hands out the groups that are done, frees what they held, answers the driver if it can.
void settle(server_actor self);
/// Turn `number` of `session` lost its client: the turn is taken back, the session freed for
/// the next one, and its group's admission given back when nothing of the group was sampled.
void abandon_turn(server_actor self, const std::string& session, uint64_t number);

// session_routes.cpp
void serve_call(server_actor self, http_call call);
/// Tokens of a streamed turn as the engine sampled them: the settled text goes to its client.
void stream_partial(server_actor self, const serving::generation_partial& partial);
runtime::http_response json_response(unsigned status, const json& body);
runtime::http_response error_response(unsigned status, const std::string& message,
                                      const std::string& param = "");

}  // namespace milesrt::session_server
