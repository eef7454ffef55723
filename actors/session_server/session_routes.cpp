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

/// The shared start of a turn (chat or generate): its session, open, admitted by the schedule
/// and without a turn in flight, and `req`'s sampling fields from `sampling`; null when refused
/// (answered: 404/409/429/503, or 400 naming the sampling field at fault).
agent::session_tree* start_turn(server_actor self, const http_call& call,
                                const agent::sampling_request& sampling,
                                serving::generation_request& req) {
  auto& st = self->state;
  const auto& id = call.request.param("id");
  agent::table_error e;
  agent::session_tree* s = st.table->find(id, clock::now(), e);
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
void sample_turn(server_actor self, const http_call& call, const agent::session_tree& s,
                 const agent::tree_mark& before, serving::generation_request req, Done done) {
  auto& st = self->state;
  const std::string id = call.request.param("id");
  const uint64_t stream_id = req.stream_id;
  const uint64_t number = ++st.next_turn;
  req.input_ids.assign(s.tokens().ids.begin(), s.tokens().ids.end());
  req.cancel_id = number;  // the turn's client leaving stops its sampling
  auto generator = st.links.pick("generate");
  st.busy[id] = {number, before, generator};
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
  self->request(generator, st.cfg.generate_deadline, serving::generate_atom::value, std::move(req))
      .then(
          [self, call, id, stream_id, own, before, done](serving::generation_result& r) mutable {
            auto& s = self->state;
            auto streamed = s.streams.find(stream_id);
            auto out = streamed == s.streams.end() ? nullptr : streamed->second.out;
            if (streamed != s.streams.end()) s.streams.erase(streamed);
            if (!own()) {
              s.counts.turns_discarded++;  // its client went: taken back already
              s.counts.turns_aborted += r.finish_reason == "abort" ? 1 : 0;
              return;
            }
            agent::table_error e;
            agent::session_tree* sess = s.table->find(id, clock::now(), e);
            if (sess == nullptr || call.responder.disconnected()) {
              s.counts.turns_discarded++;  // the client went, or the session did
              if (sess != nullptr) sess->undo(before);
              if (sess == nullptr && out && out->opened()) out->fail(409, e.message);
              if (sess == nullptr) answer_table_error(self, call, e);
              return;
            }
            s.counts.turns++;
            // Prefix reuse: of what the session held before this request (its path up to where
            // the request began), the tokens the engine's prefix cache held.
            const auto& starts = sess->current().starts();
            const uint64_t held = starts.empty() ? 0 : starts.back().tokens;
            s.counts.prompt_tokens += held;
            s.counts.prompt_tokens_reused +=
                std::min<uint64_t>(held, uint64_t(std::max<int64_t>(0, r.cached_tokens)));
            for (auto v : r.versions) s.last_version = std::max(s.last_version, v);
            done(*sess, r);
          },
          [self, call, id, stream_id, own, before](caf::error& err) {
            auto& s = self->state;
            const bool mine = own();
            s.counts.generate_failures++;
            agent::table_error e;
            if (agent::session_tree* sess = s.table->find(id, clock::now(), e); sess && mine)
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
  agent::session_tree* s = start_turn(self, call, parsed.request.sampling, req);
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
              [self, call, cid, out, stop, usage_chunk](agent::session_tree& tree,
                                                        serving::generation_result& r) {
                auto& s = self->state;
                auto& sess = tree.current();
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
  agent::session_tree* s = start_turn(self, call, parsed.request.sampling, req);
  if (s == nullptr) return;
  const auto before = s->mark();
  auto ext = s->extend_ids(parsed.request.input_ids);
  if (ext.error) {
    answer_session_error(call, *ext.error);
    return;
  }
  sample_turn(self, call, *s, before, std::move(req),
              [call](agent::session_tree& sess, serving::generation_result& r) {
                sess.current().append_sampled(token_ids(r.output_ids), r.logprobs, r.versions);
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
