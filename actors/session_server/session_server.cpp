// The session_server actor: its start (routes added to the HTTP server), the driver's requests,
// admission and the hand-out of ended groups. The routes are in session_routes.cpp.
#include <chrono>

#include "actors/lib/llm/tokenizer/chat_template.hpp"
#include "actors/session_server/server_state.hpp"
#include "actors/session_server/trajectory.hpp"
#include "runtime/core/interfaces.hpp"

namespace milesrt::session_server {
namespace {
using namespace milesrt::runtime;

using call_atom = caf::atom_constant<caf::atom("http_call")>;
using tick_atom = caf::atom_constant<caf::atom("ss_tick")>;

/// How often idle sessions and group waits are looked at.
constexpr std::chrono::milliseconds kTick{250};

/// The group key of a finished group: its name, or its one session's id.
std::string key_of(const agent::finished_group& g) {
  if (!g.group.empty()) return "g:" + g.group;
  return g.sessions.empty() ? std::string() : "s:" + g.sessions.front().id;
}

metric_map metrics_of(server_actor self) {
  auto& st = self->state;
  const auto& t = st.table->counts();
  const auto& c = st.counts;
  return {{"sessions_open", double(st.table->open_count())},
          {"sessions_opened", double(t.opened)},
          {"sessions_ended", double(t.ended)},
          {"sessions_deleted", double(t.deleted)},
          {"sessions_idle_dropped", double(t.idle_dropped)},
          {"sessions_waited_out", double(t.waited_out)},
          {"sessions_refused_full", double(t.refused_full)},
          {"session_groups_complete", double(t.groups_complete)},
          {"session_groups_partial", double(t.groups_partial)},
          {"session_groups_dropped", double(t.groups_dropped)},
          {"session_turns", double(c.turns)},
          {"session_turns_discarded", double(c.turns_discarded)},
          {"session_turns_abandoned", double(c.turns_abandoned)},
          {"session_turns_refused", double(c.turns_refused)},
          {"session_generate_failures", double(c.generate_failures)},
          {"session_tool_calls", double(c.tool_calls)},
          {"session_tool_calls_malformed", double(c.tool_calls_malformed)},
          {"session_empty_sessions", double(c.empty_sessions)},
          {"session_empty_groups", double(c.empty_groups)},
          {"session_groups_unscored", double(c.groups_unscored)}};
}

/// Answers the driver's ask once enough groups are ready.
void deliver_if_ready(server_actor self) {
  auto& st = self->state;
  if (!st.produce || st.ready.size() < st.produce->count) return;
  node_reply reply;
  for (uint64_t i = 0; i < st.produce->count; ++i) {
    reply.outputs.push_back(std::move(st.ready.front()));
    st.ready.pop_front();
  }
  st.counts.groups_out += st.produce->count;
  reply.metrics = metrics_of(self);
  st.produce->promise.deliver(std::move(reply));
  st.produce.reset();
}

/// Adds the routes: each one hands its call to the actor through the inbox.
void add_routes(server_actor self) {
  auto& st = self->state;
  auto inbox = st.inbox;
  caf::actor_addr addr = self->address();
  auto to_actor = [inbox, addr](route_kind kind) {
    return [inbox, addr, kind](http_request request, http_responder responder) {
      auto actor = caf::actor_cast<caf::actor>(addr);
      if (!actor) {
        responder.respond(error_response(503, "the session server is shutting down"));
        return;
      }
      const uint64_t id = inbox->put({kind, std::move(request), std::move(responder)});
      caf::anon_send(actor, call_atom::value, id);
    };
  };
  using m = http_method;
  st.http->route_async(m::post, "/sessions", to_actor(route_kind::open));
  st.http->route_async(m::get, "/sessions/{id}", to_actor(route_kind::get));
  st.http->route_async(m::del, "/sessions/{id}", to_actor(route_kind::remove));
  st.http->route_async(m::post, "/sessions/{id}/end", to_actor(route_kind::end));
  st.http->route_async(m::post, "/sessions/{id}/generate", to_actor(route_kind::generate));
  st.http->route_async(m::post, "/sessions/{id}/v1/chat/completions", to_actor(route_kind::chat));
  st.http->route_async(m::get, "/sessions/{id}/v1/models", to_actor(route_kind::models));
  st.http->route_async(m::get, "/health", to_actor(route_kind::health));
}

caf::behavior server_fn(server_actor self, server_config cfg, std::shared_ptr<http_server> http) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.table = std::make_unique<agent::session_table>(st.cfg.tok, st.cfg.tmpl, st.cfg.limits);
  st.format = st.cfg.tmpl ? agent::detect_tool_call_format(st.cfg.tmpl->source())
                          : agent::tool_call_format::none;
  st.http = std::move(http);
  st.inbox = std::make_shared<call_inbox>();
  add_routes(self);
  st.http->start();
  self->delayed_send(self, kTick, tick_atom::value);
  return {
      [=](uses_atom, const std::string& port, std::vector<caf::actor>& servers) {
        self->state.links.set(port, std::move(servers));
      },
      [=](call_atom, uint64_t id) {
        if (auto call = self->state.inbox->take(id)) serve_call(self, std::move(*call));
      },
      [=](turn_gone_atom, const std::string& session, uint64_t number) {
        abandon_turn(self, session, number);
      },
      [=](serving::generate_atom, const serving::generation_partial& partial) {
        stream_partial(self, partial);
      },
      [=](tick_atom) {
        settle(self);
        self->delayed_send(self, kTick, tick_atom::value);
      },
      [=](produce_atom, uint64_t count) -> caf::result<node_reply> {
        auto& s = self->state;
        if (s.produce)
          return caf::make_error(caf::sec::runtime_error,
                                 "session_server: asked for groups while an ask is open");
        if (count == 0) return node_reply{};
        s.produce = server_state::ask{self->make_response_promise(), count};
        settle(self);
        return caf::delegated<node_reply>();
      },
      // Sessions live in memory only: a resumed run starts with none (clients open new ones).
      [=](snapshot_atom, const std::string&) { return actor_state{}; },
      [=](restore_atom, const std::string&, const actor_state&) { return true; },
  };
}

}  // namespace

void abandon_turn(server_actor self, const std::string& session, uint64_t number) {
  auto& st = self->state;
  auto busy = st.busy.find(session);
  if (busy == st.busy.end() || busy->second.number != number) return;  // answered already
  const auto before = busy->second.before;
  st.busy.erase(busy);
  st.counts.turns_abandoned++;
  agent::table_error e;
  agent::session* s = st.table->find(session, clock::now(), e);
  if (s != nullptr) s->undo(before);
  // A group none of whose sessions has a sampled turn or a turn in flight holds no data yet:
  // its admission goes back at once, for another group to start.
  auto group = st.group_of.find(session);
  if (group == st.group_of.end() || st.admitted.count(group->second) == 0) return;
  auto members = st.members.find(group->second);
  if (members == st.members.end()) return;
  for (const auto& id : members->second) {
    if (st.busy.count(id) > 0) return;
    const agent::session* m = st.table->peek(id);
    if (m != nullptr && m->turns() > 0) return;
    if (m == nullptr && st.table->state_of(id) == std::optional<std::string>("ended")) return;
  }
  st.admitted.erase(group->second);
  settle(self);
}

bool admit_turn(server_actor self, const std::string& session) {
  auto& st = self->state;
  auto it = st.group_of.find(session);
  if (it == st.group_of.end()) return false;
  if (st.admitted.count(it->second) > 0) return true;
  if (!st.produce || st.admitted.size() + st.ready.size() >= st.produce->count) return false;
  st.admitted.insert(it->second);
  return true;
}

void settle(server_actor self) {
  auto& st = self->state;
  for (auto& g : st.table->take_finished(clock::now())) {
    const std::string key = key_of(g);
    st.admitted.erase(key);
    for (const auto& s : g.sessions) st.group_of.erase(s.id);
    st.members.erase(key);
    st.labels.erase(key);
    const bool unscored = st.cfg.score_unrewarded && has_unrewarded(g);
    auto e =
        to_envelope(g, st.next_group, st.last_version, st.counts.empty_sessions, st.cfg.tok.get());
    if (e.payload.get_as<llm::sample_group>(0).samples.empty()) {
      st.counts.empty_groups++;
      continue;
    }
    st.next_group++;
    st.counts.groups_unscored += unscored ? 1 : 0;
    st.ready.push_back({unscored ? "unscored" : "groups", std::move(e)});
  }
  // Groups whose sessions were all dropped (deleted, idle, waited out) are under way no more.
  for (auto it = st.members.begin(); it != st.members.end();) {
    bool alive = false;
    for (const auto& id : it->second) {
      auto state = st.table->state_of(id);
      alive = alive || (state && *state != "dropped");
    }
    if (alive) {
      ++it;
      continue;
    }
    st.admitted.erase(it->first);
    st.labels.erase(it->first);
    for (const auto& id : it->second) st.group_of.erase(id);
    it = st.members.erase(it);
  }
  deliver_if_ready(self);
}

caf::actor spawn_session_server(caf::actor_system& sys, server_config config,
                                std::shared_ptr<http_server> http) {
  return sys.spawn(server_fn, std::move(config), std::move(http));
}

}  // namespace milesrt::session_server
