// The session server's HTTP routes, run on its actor: sessions opened, read, ended and deleted;
// a turn (chat completions, or ids for harnesses that tokenize themselves) sampled through the
// generation service and appended to its session's exact tokens.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <sstream>

#include "actors/lib/agent/openai_api.hpp"
#include "actors/lib/agent/turn.hpp"
#include "actors/lib/llm/tokenizer/tokenizer.hpp"
#include "actors/lib/serving/generate_messages.hpp"
#include "actors/session_server/reply_stream.hpp"
#include "actors/session_server/server_state.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/untrusted_text.hpp"

namespace milesrt::session_server {
using runtime::http_response;
namespace {

/// The engine's ids as the tokenizer's.
std::vector<llm::token_id> token_ids(const std::vector<int64_t>& ids) {
  return std::vector<llm::token_id>(ids.begin(), ids.end());
}

std::string fmt_number(double x) {
  std::ostringstream o;
  o << x;
  return o.str();
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// The body as a JSON object ({} when empty), or an error answered.
std::optional<json> object_body(const http_call& call) {
  if (call.request.body.empty()) return json::object();
  if (auto deep = runtime::json_nesting_problem(call.request.body); !deep.empty()) {
    call.responder.respond(error_response(400, "body: " + deep));
    return std::nullopt;
  }
  json body = json::parse(call.request.body, nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    call.responder.respond(error_response(400, "body: expected a JSON object"));
    return std::nullopt;
  }
  return body;
}

/// A table refusal as HTTP: unknown 404, ended 409, full 429.
void answer_table_error(server_actor self, const http_call& call, const agent::table_error& e) {
  if (e.what == agent::table_error::kind::full) {
    auto r = error_response(429, e.message);
    r.headers.push_back({"Retry-After", std::to_string(self->state.cfg.retry_after_seconds)});
    call.responder.respond(std::move(r));
    return;
  }
  call.responder.respond(
      error_response(e.what == agent::table_error::kind::unknown ? 404 : 409, e.message));
}

void answer_session_error(const http_call& call, const agent::session_error& e) {
  using k = agent::session_error::kind;
  const unsigned status = e.what == k::bad_request       ? 400
                          : e.what == k::too_long        ? 413
                          : e.what == k::template_failed ? 500
                                                         : 409;
  auto body = agent::error_body(status, e.message, agent::error_field(e.message));
  if (e.index) body["error"]["index"] = *e.index;
  call.responder.respond(json_response(status, body));
}

/// What is wrong with a new session's metadata ("" when nothing): an object, whose `label` (the
/// reference a reward actor judges against) is a string and that of its group's other sessions.
std::string label_problem(server_actor self, const std::string& group, const json& metadata,
                          std::string& label) {
  if (metadata.is_null()) return "";
  if (!metadata.is_object()) return "metadata: expected an object";
  if (!metadata.contains("label") || metadata["label"].is_null()) return "";
  if (!metadata["label"].is_string()) return "metadata.label: expected a string";
  label = metadata["label"].get<std::string>();
  if (group.empty()) return "";
  auto it = self->state.labels.find("g:" + group);
  if (it == self->state.labels.end() || it->second == label) return "";
  return "metadata.label: '" + label + "' differs from group '" + group + "''s label '" +
         it->second + "'";
}

void open_session(server_actor self, const http_call& call) {
  auto& st = self->state;
  auto body = object_body(call);
  if (!body) return;
  std::string group;
  if (body->contains("group") && !(*body)["group"].is_null()) {
    if (!(*body)["group"].is_string()) {
      call.responder.respond(error_response(400, "group: expected a string", "group"));
      return;
    }
    group = (*body)["group"].get<std::string>();
  }
  json metadata = body->contains("metadata") ? (*body)["metadata"] : json(nullptr);
  std::string label;
  if (auto problem = label_problem(self, group, metadata, label); !problem.empty()) {
    call.responder.respond(error_response(400, problem, "metadata"));
    return;
  }
  std::string id;
  if (auto e = st.table->open(group, metadata, clock::now(), id)) {
    answer_table_error(self, call, *e);
    return;
  }
  const std::string key = group.empty() ? "s:" + id : "g:" + group;
  if (!label.empty()) st.labels[key] = label;
  st.group_of[id] = key;
  st.members[key].insert(id);
  call.responder.respond(json_response(
      200, {{"id", id}, {"base_url", st.cfg.url + "/sessions/" + id + "/v1"}, {"group", group}}));
}

/// Whether a query string asks for a session's tokens (`tokens=1` or `tokens=true`).
bool wants_tokens(const std::string& query) {
  size_t at = 0;
  while (at <= query.size()) {
    const size_t end = std::min(query.find('&', at), query.size());
    const std::string_view kv = std::string_view(query).substr(at, end - at);
    if (kv == "tokens=1" || kv == "tokens=true") return true;
    at = end + 1;
  }
  return false;
}

void get_session(server_actor self, const http_call& call) {
  auto& st = self->state;
  const auto& id = call.request.param("id");
  auto state = st.table->state_of(id);
  if (!state) {
    call.responder.respond(error_response(404, "no session '" + id + "'"));
    return;
  }
  json out = {{"id", id}, {"state", *state}};
  if (*state == "open") {
    agent::table_error e;
    const agent::session* s = st.table->find(id, clock::now(), e);
    size_t sampled = 0;
    for (auto o : s->tokens().origins) sampled += o == agent::token_origin::sampled ? 1 : 0;
    out["turns"] = s->turns();
    out["tokens"] = s->tokens().size();
    out["sampled_tokens"] = sampled;
    out["messages"] = s->messages();
    if (wants_tokens(call.request.query)) {
      const auto& t = s->tokens();
      std::vector<int> mask(t.size());
      for (size_t i = 0; i < t.size(); ++i) mask[i] = t.origins[i] == agent::token_origin::sampled;
      out["token_ids"] = t.ids;
      out["loss_mask"] = mask;
      out["logprobs"] = t.logprobs;
      out["versions"] = t.versions;
    }
  }
  call.responder.respond(json_response(200, out));
}

void end_or_remove(server_actor self, const http_call& call, bool end) {
  auto& st = self->state;
  const auto& id = call.request.param("id");
  std::optional<double> reward;
  if (end) {
    auto body = object_body(call);
    if (!body) return;
    if (body->contains("reward") && !(*body)["reward"].is_null()) {
      if (!(*body)["reward"].is_number()) {
        call.responder.respond(error_response(400, "reward: expected a number", "reward"));
        return;
      }
      reward = (*body)["reward"].get<double>();
    }
  }
  if (st.busy.count(id) > 0) {
    call.responder.respond(error_response(409, "session '" + id + "' has a turn in flight"));
    return;
  }
  auto e = end ? st.table->end(id, reward, clock::now()) : st.table->remove(id, clock::now());
  if (e) {
    answer_table_error(self, call, *e);
    return;
  }
  call.responder.respond(json_response(200, {{"id", id}, {"state", end ? "ended" : "deleted"}}));
  settle(self);
}

/// The shared start of a turn (chat or generate): its session, open, admitted by the schedule
/// and without a turn in flight, and `req`'s sampling fields from `sampling`; null when refused
/// (answered: 404/409/429/503, or 400 naming the sampling field at fault).
agent::session* start_turn(server_actor self, const http_call& call,
                           const agent::sampling_request& sampling,
                           serving::generation_request& req) {
  auto& st = self->state;
  const auto& id = call.request.param("id");
  agent::table_error e;
  agent::session* s = st.table->find(id, clock::now(), e);
  if (s == nullptr) {
    answer_table_error(self, call, e);
    return nullptr;
  }
  if (st.busy.count(id) > 0) {
    call.responder.respond(error_response(409, "session '" + id + "' has a turn in flight"));
    return nullptr;
  }
  if (sampling.max_tokens > st.cfg.max_new_tokens) {
    const std::string problem =
        "max_tokens: at most " + std::to_string(st.cfg.max_new_tokens) + " on this server";
    call.responder.respond(error_response(400, problem, "max_tokens"));
    return nullptr;
  }
  if (sampling.temperature_given && sampling.temperature != st.cfg.temperature) {
    // The trainer scores every sampled token at the graph's temperature: a turn sampled at
    // another would train on log-probs that are not the policy's.
    call.responder.respond(error_response(
        400,
        "temperature: this server samples at " + fmt_number(st.cfg.temperature) +
            ", the temperature the trainer scores with; leave it out or send that value",
        "temperature"));
    return nullptr;
  }
  if (!admit_turn(self, id)) {
    st.counts.turns_refused++;
    auto r = error_response(429, "the schedule admits no new session group now; retry later");
    r.headers.push_back({"Retry-After", std::to_string(st.cfg.retry_after_seconds)});
    call.responder.respond(std::move(r));
    return nullptr;
  }
  if (!st.links.ready("generate")) {
    call.responder.respond(error_response(503, "no generation service joined"));
    return nullptr;
  }
  req.temperature = st.cfg.temperature;
  req.top_p = sampling.top_p;
  req.max_tokens = sampling.max_tokens == 0 ? st.cfg.max_new_tokens : sampling.max_tokens;
  req.stop = sampling.stop;
  req.seed = st.cfg.seed * 1000003 + st.counts.turns * 7919 + s->tokens().size();
  return s;
}

/// Samples the turn of `s` (its tokens are the input; `before`: where it stood before this
/// turn's request was appended), then calls `done` with the result (the session looked up again:
/// it may have gone meanwhile), or answers the failure. A turn that fails, or whose client goes
/// (told at once by the HTTP server), is taken back to `before`: nothing of it stays.
template <class Done>
void sample_turn(server_actor self, const http_call& call, const agent::session& s,
                 const agent::session_mark& before, serving::generation_request req, Done done) {
  auto& st = self->state;
  const std::string id = call.request.param("id");
  const uint64_t stream_id = req.stream_id;
  const uint64_t number = ++st.next_turn;
  req.input_ids.assign(s.tokens().ids.begin(), s.tokens().ids.end());
  st.busy[id] = {number, before};
  caf::actor_addr addr = self->address();
  call.responder.on_disconnect([addr, id, number] {
    if (auto actor = caf::actor_cast<caf::actor>(addr))
      caf::anon_send(actor, turn_gone_atom::value, id, number);
  });
  // Still this turn's, not abandoned (its client gone) and followed by another: frees it.
  auto own = [self, id, number] {
    auto it = self->state.busy.find(id);
    if (it == self->state.busy.end() || it->second.number != number) return false;
    self->state.busy.erase(it);
    return true;
  };
  self->request(st.links.pick("generate"), st.cfg.generate_deadline, serving::generate_atom::value,
                std::move(req))
      .then(
          [self, call, id, stream_id, own, before, done](serving::generation_result& r) mutable {
            auto& s = self->state;
            auto streamed = s.streams.find(stream_id);
            auto out = streamed == s.streams.end() ? nullptr : streamed->second.out;
            if (streamed != s.streams.end()) s.streams.erase(streamed);
            if (!own()) {
              s.counts.turns_discarded++;  // its client went: taken back already
              return;
            }
            agent::table_error e;
            agent::session* sess = s.table->find(id, clock::now(), e);
            if (sess == nullptr || call.responder.disconnected()) {
              s.counts.turns_discarded++;  // the client went, or the session did
              if (sess != nullptr) sess->undo(before);
              if (sess == nullptr && out && out->opened()) out->fail(409, e.message);
              if (sess == nullptr) answer_table_error(self, call, e);
              return;
            }
            s.counts.turns++;
            for (auto v : r.versions) s.last_version = std::max(s.last_version, v);
            done(*sess, r);
          },
          [self, call, id, stream_id, own, before](caf::error& err) {
            auto& s = self->state;
            const bool mine = own();
            s.counts.generate_failures++;
            agent::table_error e;
            if (agent::session* sess = s.table->find(id, clock::now(), e); sess && mine)
              sess->undo(before);
            // The engine refuses a request it can never serve (an id past the model's
            // vocabulary, more tokens than its cache holds): the client's to fix, not to retry.
            const bool refused = runtime::class_of(err) == errc::bad_input;
            const unsigned status = refused ? 400 : 503;
            const std::string message = "generation failed: " + runtime::message_of(err);
            auto it = s.streams.find(stream_id);
            if (it != s.streams.end() && it->second.out->opened()) {
              it->second.out->fail(status, message);
            } else {
              call.responder.respond(error_response(status, message));
            }
            s.streams.erase(stream_id);
          });
}

/// Whether the session's prompt ends inside an opened `<think>` block (the template opened it).
bool think_opened(const llm::tokenizer& tok, const agent::session_tokens& t) {
  const size_t n = std::min<size_t>(4, t.size());
  std::string tail =
      tok.decode(std::vector<llm::token_id>(t.ids.end() - std::ptrdiff_t(n), t.ids.end()));
  while (!tail.empty() && std::isspace(static_cast<unsigned char>(tail.back()))) tail.pop_back();
  return tail.size() >= 7 && tail.compare(tail.size() - 7, 7, "<think>") == 0;
}

void chat(server_actor self, const http_call& call) {
  auto parsed = agent::parse_chat_request(call.request.body);
  if (!parsed.error.empty()) {
    call.responder.respond(error_response(400, parsed.error, agent::error_field(parsed.error)));
    return;
  }
  serving::generation_request req;
  agent::session* s = start_turn(self, call, parsed.request.sampling, req);
  if (s == nullptr) return;
  llm::chat_options options;
  options.add_generation_prompt = true;
  options.tools = parsed.request.tools;
  options.extra = parsed.request.template_kwargs;
  const auto before = s->mark();
  auto ext = s->extend(parsed.request.messages, options);
  if (ext.error) {
    answer_session_error(call, *ext.error);
    return;
  }
  auto& st = self->state;
  const std::string cid = "chatcmpl-" + call.request.param("id") + "-" + std::to_string(s->turns());
  std::shared_ptr<reply_stream> out;
  if (parsed.request.stream) {
    out = std::make_shared<reply_stream>(call.responder, cid, st.cfg.model_name, unix_now());
    req.stream_id = ++st.next_stream;
    st.streams[req.stream_id] = {out, {}, think_opened(*st.cfg.tok, s->tokens()), req.stop};
  }
  const bool usage_chunk = parsed.request.include_usage;
  const auto stop = req.stop;
  sample_turn(self, call, *s, before, std::move(req),
              [self, call, cid, out, stop, usage_chunk](agent::session& sess,
                                                        serving::generation_result& r) {
                auto& s = self->state;
                const agent::usage_counts usage{sess.tokens().size(), r.output_ids.size()};
                const auto turn = agent::record_chat_turn(
                    sess, {token_ids(r.output_ids), r.logprobs, r.versions, r.finish_reason}, stop,
                    s.format, "call_" + std::to_string(sess.turns()) + "_");
                s.counts.tool_calls += turn.reply.tool_calls.size();
                s.counts.tool_calls_malformed += turn.reply.malformed;
                if (out) {
                  out->finish(turn.reply, turn.finish, usage_chunk ? &usage : nullptr);
                  return;
                }
                call.responder.respond(
                    json_response(200, agent::completion_body(cid, s.cfg.model_name, unix_now(),
                                                              turn.reply, turn.finish, usage)));
              });
}

void generate(server_actor self, const http_call& call) {
  auto parsed = agent::parse_generate_request(call.request.body);
  if (!parsed.error.empty()) {
    call.responder.respond(error_response(400, parsed.error, agent::error_field(parsed.error)));
    return;
  }
  serving::generation_request req;
  agent::session* s = start_turn(self, call, parsed.request.sampling, req);
  if (s == nullptr) return;
  const auto before = s->mark();
  auto ext = s->extend_ids(parsed.request.input_ids);
  if (ext.error) {
    answer_session_error(call, *ext.error);
    return;
  }
  sample_turn(self, call, *s, before, std::move(req),
              [call](agent::session& sess, serving::generation_result& r) {
                sess.append_sampled(token_ids(r.output_ids), r.logprobs, r.versions);
                call.responder.respond(json_response(200, {{"output_ids", r.output_ids},
                                                           {"logprobs", r.logprobs},
                                                           {"versions", r.versions},
                                                           {"finish_reason", r.finish_reason}}));
              });
}

}  // namespace

http_response json_response(unsigned status, const json& body) {
  // Error messages quote what the client sent (a session id from the path, say), which may be
  // invalid UTF-8: replaced, never thrown.
  http_response r(status, "application/json",
                  body.dump(-1, ' ', false, json::error_handler_t::replace));
  // A conflict does not go away by asking again (the openai client retries a 409 otherwise).
  if (status == 409) r.headers.push_back({"x-should-retry", "false"});
  return r;
}

http_response error_response(unsigned status, const std::string& message,
                             const std::string& param) {
  return json_response(status, agent::error_body(status, message, param));
}

void stream_partial(server_actor self, const serving::generation_partial& partial) {
  auto& st = self->state;
  auto it = st.streams.find(partial.stream_id);
  if (it == st.streams.end()) return;
  auto& turn = it->second;
  turn.ids.insert(turn.ids.end(), partial.output_ids.begin(), partial.output_ids.end());
  if (turn.out->gone()) return;
  // Only the text of the tokens the turn will keep (see agent/turn.hpp): a stop string that
  // begins inside a token takes that token's text out of the reply.
  const size_t kept = agent::tokens_before_stop(*st.cfg.tok, turn.ids, turn.stop);
  const auto text = agent::reply_text(
      *st.cfg.tok, std::vector<llm::token_id>(
                       turn.ids.begin(), turn.ids.begin() + static_cast<std::ptrdiff_t>(kept)));
  turn.out->update(settle_text(text, st.format, turn.think_open, turn.stop));
}

void serve_call(server_actor self, http_call call) {
  auto& st = self->state;
  switch (call.route) {
    case route_kind::open:
      return open_session(self, call);
    case route_kind::get:
      return get_session(self, call);
    case route_kind::remove:
      return end_or_remove(self, call, false);
    case route_kind::end:
      return end_or_remove(self, call, true);
    case route_kind::chat:
      return chat(self, call);
    case route_kind::generate:
      return generate(self, call);
    case route_kind::models:
      call.responder.respond(
          json_response(200, {{"object", "list"},
                              {"data", json::array({{{"id", st.cfg.model_name},
                                                     {"object", "model"},
                                                     {"created", 0},
                                                     {"owned_by", "milesrt"}}})}}));
      return;
    case route_kind::health:
      call.responder.respond(json_response(200, {{"status", "ok"},
                                                 {"open_sessions", st.table->open_count()},
                                                 {"admitting", st.produce.has_value()},
                                                 {"ended_groups_waiting", st.ready.size()}}));
      return;
  }
}

}  // namespace milesrt::session_server
