// The session server's routes of a session's life, run on its actor: opened (a subagent under a
// parent), read (its trajectory tree), ended (one reward, or one per trajectory) and deleted.
#include "actors/lib/agent/openai_api.hpp"
#include "actors/session_server/server_state.hpp"
#include "runtime/core/untrusted_text.hpp"

namespace milesrt::session_server {
namespace {

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

/// A string field of `body` ("" when absent or null); false (answered 400) when not a string.
bool string_field(const http_call& call, const json& body, const char* field, std::string& out) {
  if (!body.contains(field) || body[field].is_null()) return true;
  if (!body[field].is_string()) {
    call.responder.respond(error_response(400, std::string(field) + ": expected a string", field));
    return false;
  }
  out = body[field].get<std::string>();
  return true;
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

/// `/end`'s rewards: `reward` (a number: every trained path's) and `rewards` (an object of path
/// id -> number: those paths' own, each a path of the session). False when answered 400.
bool parse_rewards(server_actor self, const http_call& call, const json& body,
                   std::optional<double>& reward, std::map<uint64_t, double>& rewards) {
  if (body.contains("reward") && !body["reward"].is_null()) {
    if (!body["reward"].is_number()) {
      call.responder.respond(error_response(400, "reward: expected a number", "reward"));
      return false;
    }
    reward = body["reward"].get<double>();
  }
  if (!body.contains("rewards") || body["rewards"].is_null()) return true;
  if (!body["rewards"].is_object()) {
    call.responder.respond(
        error_response(400, "rewards: expected an object of trajectory id -> number", "rewards"));
    return false;
  }
  agent::table_error e;
  const agent::session_tree* tree =
      self->state.table->find(call.request.param("id"), clock::now(), e);
  for (const auto& [key, value] : body["rewards"].items()) {
    const std::string field = "rewards." + key;
    const bool digits =
        !key.empty() && key.size() < 19 && key.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || (tree && !tree->has_path(std::stoull(key)))) {
      call.responder.respond(error_response(
          400, field + ": the session has no trajectory '" + key + "' (GET /sessions/{id})",
          "rewards"));
      return false;
    }
    if (!value.is_number()) {
      call.responder.respond(error_response(400, field + ": expected a number", "rewards"));
      return false;
    }
    rewards[std::stoull(key)] = value.get<double>();
  }
  return true;
}

/// A turn in flight of a subagent its parent's end (or deletion) closes: taken back, its
/// sampling stopped.
void take_back_children(server_actor self, const std::string& id) {
  auto& st = self->state;
  for (const auto& child : st.table->open_children(id)) {
    auto busy = st.busy.find(child);
    if (busy != st.busy.end()) abandon_turn(self, child, busy->second.number);
  }
}

}  // namespace

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

void answer_table_error(server_actor self, const http_call& call, const agent::table_error& e) {
  using k = agent::table_error::kind;
  if (e.what == k::full) {
    auto r = error_response(429, e.message);
    r.headers.push_back({"Retry-After", std::to_string(self->state.cfg.retry_after_seconds)});
    call.responder.respond(std::move(r));
    return;
  }
  const unsigned status = e.what == k::unknown ? 404 : e.what == k::bad ? 400 : 409;
  call.responder.respond(error_response(status, e.message, agent::error_field(e.message)));
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
  std::string group, parent;
  if (!string_field(call, *body, "group", group) || !string_field(call, *body, "parent", parent))
    return;
  json metadata = body->contains("metadata") ? (*body)["metadata"] : json(nullptr);
  std::string label;
  const auto up = st.group_of.find(parent);
  const std::string label_group =
      !parent.empty() && up != st.group_of.end() && up->second.rfind("g:", 0) == 0
          ? up->second.substr(2)
          : group;
  if (auto problem = label_problem(self, label_group, metadata, label); !problem.empty()) {
    call.responder.respond(error_response(400, problem, "metadata"));
    return;
  }
  std::string id;
  if (auto e = st.table->open(group, metadata, clock::now(), id, parent)) {
    answer_table_error(self, call, *e);
    return;
  }
  // A subagent is a session of its parent's group.
  const std::string key = !parent.empty() ? st.group_of.at(parent)
                          : group.empty() ? "s:" + id
                                          : "g:" + group;
  if (!label.empty() && st.labels.count(key) == 0) st.labels[key] = label;
  st.group_of[id] = key;
  st.members[key].insert(id);
  json out = {{"id", id},
              {"base_url", st.cfg.url + "/sessions/" + id + "/v1"},
              {"group", key.rfind("g:", 0) == 0 ? key.substr(2) : std::string()}};
  if (!parent.empty()) out["parent"] = parent;
  call.responder.respond(json_response(200, out));
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
    const agent::session_tree* s = st.table->find(id, clock::now(), e);
    size_t sampled = 0;
    for (auto o : s->tokens().origins) sampled += o == agent::token_origin::sampled ? 1 : 0;
    out["turns"] = s->turns();
    out["tokens"] = s->tokens().size();
    out["sampled_tokens"] = sampled;
    out["messages"] = s->messages();
    out["trajectory"] = s->current_id();
    const bool ids = wants_tokens(call.request.query);
    out["tree"] = s->describe(ids);
    if (ids) {
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
  std::map<uint64_t, double> rewards;
  if (end) {
    auto body = object_body(call);
    if (!body || !parse_rewards(self, call, *body, reward, rewards)) return;
  }
  if (st.busy.count(id) > 0) {
    call.responder.respond(error_response(409, "session '" + id + "' has a turn in flight"));
    return;
  }
  if (st.table->state_of(id) == std::optional<std::string>("open")) take_back_children(self, id);
  auto e = end ? st.table->end(id, reward, clock::now(), std::move(rewards))
               : st.table->remove(id, clock::now());
  if (e) {
    answer_table_error(self, call, *e);
    return;
  }
  call.responder.respond(json_response(200, {{"id", id}, {"state", end ? "ended" : "deleted"}}));
  settle(self);
}

}  // namespace milesrt::session_server
