// The session server's HTTP routes, run on its actor: sessions opened, read, ended and deleted;
// a turn (chat completions, or ids for harnesses that tokenize themselves) sampled through the
// generation service and appended to its session's exact tokens.
#include <algorithm>
#include <chrono>

#include "actors/lib/agent/openai_api.hpp"
#include "actors/lib/llm/tokenizer/tokenizer.hpp"
#include "actors/lib/serving/generate_messages.hpp"
#include "actors/session_server/server_state.hpp"

namespace milesrt::session_server {
using runtime::http_response;
namespace {

/// The engine's ids as the tokenizer's.
std::vector<llm::token_id> token_ids(const std::vector<int64_t>& ids) {
  return std::vector<llm::token_id>(ids.begin(), ids.end());
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// The body as a JSON object ({} when empty), or an error answered.
std::optional<json> object_body(const http_call& call) {
  if (call.request.body.empty()) return json::object();
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
  std::string id;
  if (auto e = st.table->open(group, metadata, clock::now(), id)) {
    answer_table_error(self, call, *e);
    return;
  }
  const std::string key = group.empty() ? "s:" + id : "g:" + group;
  st.group_of[id] = key;
  st.members[key].insert(id);
  call.responder.respond(json_response(
      200, {{"id", id}, {"base_url", st.cfg.url + "/sessions/" + id + "/v1"}, {"group", group}}));
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

/// The session of a turn, admitted and not busy; null when refused (answered).
agent::session* turn_session(server_actor self, const http_call& call) {
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
  return s;
}

/// The generation request of a turn; "" or the error of its sampling fields.
std::string make_request(server_actor self, const agent::session& s,
                         const agent::sampling_request& sampling,
                         serving::generation_request& out) {
  const auto& cfg = self->state.cfg;
  if (!sampling.stop.empty())
    return "stop: stop strings are not supported (the model's end of turn stops)";
  if (sampling.max_tokens > cfg.max_new_tokens)
    return "max_tokens: at most " + std::to_string(cfg.max_new_tokens) + " on this server";
  out.input_ids.assign(s.tokens().ids.begin(), s.tokens().ids.end());
  out.temperature = sampling.temperature;
  out.top_p = sampling.top_p;
  out.max_tokens = sampling.max_tokens == 0 ? cfg.max_new_tokens : sampling.max_tokens;
  out.seed = cfg.seed * 1000003 + self->state.counts.turns * 7919 + s.tokens().size();
  return "";
}

/// Samples the turn, then calls `done` with the result (the session looked up again: it may have
/// gone meanwhile), or answers the failure.
template <class Done>
void sample_turn(server_actor self, const http_call& call, serving::generation_request req,
                 Done done) {
  auto& st = self->state;
  const std::string id = call.request.param("id");
  st.busy.insert(id);
  self->request(st.links.pick("generate"), st.cfg.generate_deadline, serving::generate_atom::value,
                std::move(req))
      .then(
          [self, call, id, done](serving::generation_result& r) mutable {
            auto& s = self->state;
            s.busy.erase(id);
            agent::table_error e;
            agent::session* sess = s.table->find(id, clock::now(), e);
            if (sess == nullptr || call.responder.disconnected()) {
              s.counts.turns_discarded++;  // the client went, or the session did
              if (sess == nullptr) answer_table_error(self, call, e);
              return;
            }
            s.counts.turns++;
            for (auto v : r.versions) s.last_version = std::max(s.last_version, v);
            done(*sess, r);
          },
          [self, call, id](caf::error& err) {
            auto& s = self->state;
            s.busy.erase(id);
            s.counts.generate_failures++;
            call.responder.respond(
                error_response(503, "generation failed: " + self->system().render(err)));
          });
}

void stream_reply(server_actor self, const http_call& call, const std::string& cid,
                  const agent::parsed_reply& parsed, const std::string& finish,
                  const agent::usage_counts& usage, bool include_usage) {
  const auto& model = self->state.cfg.model_name;
  const int64_t created = unix_now();
  auto stream = call.responder.stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
  auto chunk = [&](json delta, const std::string& f) {
    stream.event(agent::chunk_body(cid, model, created, std::move(delta), f).dump());
  };
  chunk({{"role", "assistant"}, {"content", ""}}, "");
  if (!parsed.reasoning.empty()) chunk({{"reasoning_content", parsed.reasoning}}, "");
  if (!parsed.content.empty()) chunk({{"content", parsed.content}}, "");
  for (size_t i = 0; i < parsed.tool_calls.size(); ++i) {
    json call_delta = parsed.tool_calls[i];
    call_delta["index"] = i;
    chunk({{"tool_calls", json::array({call_delta})}}, "");
  }
  chunk(json::object(), finish);
  if (include_usage) {
    json u = agent::chunk_body(cid, model, created, json::object(), "");
    u["choices"] = json::array();
    u["usage"] = {{"prompt_tokens", usage.prompt_tokens},
                  {"completion_tokens", usage.completion_tokens},
                  {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
    stream.event(u.dump());
  }
  stream.event("[DONE]");
  stream.close();
}

void chat(server_actor self, const http_call& call) {
  auto parsed = agent::parse_chat_request(call.request.body);
  if (!parsed.error.empty()) {
    call.responder.respond(error_response(400, parsed.error, agent::error_field(parsed.error)));
    return;
  }
  agent::session* s = turn_session(self, call);
  if (s == nullptr) return;
  serving::generation_request req;
  if (auto problem = make_request(self, *s, parsed.request.sampling, req); !problem.empty()) {
    call.responder.respond(error_response(400, problem, agent::error_field(problem)));
    return;
  }
  llm::chat_options options;
  options.add_generation_prompt = true;
  options.tools = parsed.request.tools;
  options.extra = parsed.request.template_kwargs;
  auto ext = s->extend(parsed.request.messages, options);
  if (ext.error) {
    answer_session_error(call, *ext.error);
    return;
  }
  req.input_ids.assign(s->tokens().ids.begin(), s->tokens().ids.end());
  const bool stream = parsed.request.stream, usage_chunk = parsed.request.include_usage;
  sample_turn(
      self, call, std::move(req),
      [self, call, stream, usage_chunk](agent::session& sess, serving::generation_result& r) {
        auto& s = self->state;
        const std::string cid =
            "chatcmpl-" + call.request.param("id") + "-" + std::to_string(sess.turns());
        auto reply = agent::parse_reply(agent::reply_text(*s.cfg.tok, token_ids(r.output_ids)),
                                        s.format, "call_" + std::to_string(sess.turns()) + "_");
        s.counts.tool_calls += reply.tool_calls.size();
        s.counts.tool_calls_malformed += reply.malformed;
        const agent::usage_counts usage{sess.tokens().size(), r.output_ids.size()};
        sess.append_sampled(token_ids(r.output_ids), r.logprobs, r.versions,
                            agent::assistant_message(reply));
        const auto finish = agent::finish_reason(reply, r.finish_reason == "length");
        if (stream) {
          stream_reply(self, call, cid, reply, finish, usage, usage_chunk);
        } else {
          call.responder.respond(json_response(
              200,
              agent::completion_body(cid, s.cfg.model_name, unix_now(), reply, finish, usage)));
        }
      });
}

void generate(server_actor self, const http_call& call) {
  auto parsed = agent::parse_generate_request(call.request.body);
  if (!parsed.error.empty()) {
    call.responder.respond(error_response(400, parsed.error, agent::error_field(parsed.error)));
    return;
  }
  agent::session* s = turn_session(self, call);
  if (s == nullptr) return;
  serving::generation_request req;
  if (auto problem = make_request(self, *s, parsed.request.sampling, req); !problem.empty()) {
    call.responder.respond(error_response(400, problem, agent::error_field(problem)));
    return;
  }
  auto ext = s->extend_ids(parsed.request.input_ids);
  if (ext.error) {
    answer_session_error(call, *ext.error);
    return;
  }
  req.input_ids.assign(s->tokens().ids.begin(), s->tokens().ids.end());
  sample_turn(self, call, std::move(req),
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
  return http_response(status, "application/json", body.dump());
}

http_response error_response(unsigned status, const std::string& message,
                             const std::string& param) {
  return json_response(status, agent::error_body(status, message, param));
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
