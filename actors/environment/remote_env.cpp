// The built-in `remote` environment: each episode's reset and steps are POSTs to an HTTP server
// (the protocol is in docs/environments.md):
//   POST URL/reset {"episode_id", "task": {"prompt", "messages", "label"}}
//     -> {"messages": [...], "tools": [...] (optional)}
//   POST URL/step {"episode_id", "message": {assistant message}}
//     -> {"messages": [...], "reward": number, "done": bool,
//         "tool_calls": n, "tool_errors": n (both optional)}
// Options: {"url": "http://host:port[/base]", "timeoutSeconds": 30}. A server that cannot be
// reached, answers other than 200, or answers something else than the protocol's JSON throws
// std::runtime_error naming the URL and what was wrong. An answer's bytes are not trusted: one
// that is not UTF-8 or nests deeper than runtime::max_json_nesting is refused before it is
// parsed, and quoted in messages only as a repaired excerpt (messages end up in JSON files).
#include <cmath>
#include <limits>
#include <stdexcept>

#include "actors/environment/environment.hpp"
#include "runtime/core/untrusted_text.hpp"
#include "runtime/http/http_client.hpp"

namespace milesrt::environment {
namespace {

using runtime::excerpt;

struct remote_server {
  runtime::http_url url;
  std::string base;  ///< the URL as given, for messages
  double timeout_seconds = 30;

  /// POSTs `body` to base/`path` and returns the answer's JSON object.
  json post(const std::string& path, const json& body) const {
    runtime::http_url u = url;
    if (!u.target.empty() && u.target.back() == '/') u.target.pop_back();
    u.target += "/" + path;
    const std::string where = "remote environment: POST " + base + "/" + path + ": ";
    runtime::http_reply r;
    try {
      r = runtime::http_post(u, body.dump(-1, ' ', false, json::error_handler_t::replace),
                             std::chrono::duration<double>(timeout_seconds));
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(where + e.what());
    }
    if (r.status != 200)
      throw std::runtime_error(where + "HTTP " + std::to_string(r.status) + ": " + excerpt(r.body));
    if (!runtime::valid_utf8(r.body))
      throw std::runtime_error(where + "the answer is not valid UTF-8: " + excerpt(r.body));
    if (auto deep = runtime::json_nesting_problem(r.body); !deep.empty())
      throw std::runtime_error(where + "the answer is " + deep);
    json j = json::parse(r.body, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      throw std::runtime_error(where + "the answer is not a JSON object: " + excerpt(r.body));
    return j;
  }
};

/// The answer's `messages`: a list of objects with a string role.
json messages_of(const json& answer, const std::string& where) {
  if (!answer.contains("messages") || !answer["messages"].is_array())
    throw std::runtime_error(where + "'messages' must be a list of messages");
  for (size_t i = 0; i < answer["messages"].size(); ++i) {
    const auto& m = answer["messages"][i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      throw std::runtime_error(where + "messages[" + std::to_string(i) +
                               "] must be an object with a string 'role'");
  }
  return answer["messages"];
}

uint32_t count_of(const json& answer, const char* key, const std::string& where) {
  if (!answer.contains(key)) return 0;
  const auto& v = answer[key];
  // A count past uint32 is refused, not truncated: get<uint32_t> would wrap it silently.
  if (!v.is_number_unsigned() || v.get<uint64_t>() > std::numeric_limits<uint32_t>::max())
    throw std::runtime_error(where + "'" + key + "' must be a count (an integer from 0 to " +
                             std::to_string(std::numeric_limits<uint32_t>::max()) + ")");
  return v.get<uint32_t>();
}

class remote_episode final : public episode {
 public:
  remote_episode(std::shared_ptr<const remote_server> server, task t, std::string id)
      : server_(std::move(server)), task_(std::move(t)), id_(std::move(id)) {}

  observation reset() override {
    json body = {
        {"episode_id", id_},
        {"task", {{"prompt", task_.prompt}, {"messages", task_.messages}, {"label", task_.label}}}};
    json a = server_->post("reset", body);
    const std::string where = "remote environment: " + server_->base + "/reset answered: ";
    observation o;
    o.messages = messages_of(a, where);
    if (o.messages.empty()) throw std::runtime_error(where + "'messages' must not be empty");
    if (a.contains("tools")) {
      if (!a["tools"].is_array()) throw std::runtime_error(where + "'tools' must be a list");
      o.tools = a["tools"];
    }
    return o;
  }

  observation step(const json& message) override {
    json a = server_->post("step", {{"episode_id", id_}, {"message", message}});
    const std::string where = "remote environment: " + server_->base + "/step answered: ";
    observation o;
    o.messages = messages_of(a, where);
    if (!a.contains("done") || !a["done"].is_boolean())
      throw std::runtime_error(where + "'done' must be true or false");
    o.done = a["done"].get<bool>();
    if (!a.contains("reward") || !a["reward"].is_number() ||
        !std::isfinite(a["reward"].get<double>()))
      throw std::runtime_error(where + "'reward' must be a finite number");
    o.reward = a["reward"].get<double>();
    if (a.contains("tools")) {
      if (!a["tools"].is_array()) throw std::runtime_error(where + "'tools' must be a list");
      o.tools = a["tools"];
    }
    o.tool_calls = count_of(a, "tool_calls", where);
    o.tool_errors = count_of(a, "tool_errors", where);
    return o;
  }

 private:
  std::shared_ptr<const remote_server> server_;
  task task_;
  std::string id_;
};

class remote final : public environment {
 public:
  std::string configure(const json& options) override {
    auto s = std::make_shared<remote_server>();
    for (const auto& [key, value] : options.items()) {
      if (key == "url") {
        if (!value.is_string()) return "options.url: expected a string (http://host:port)";
        s->base = value.get<std::string>();
      } else if (key == "timeoutSeconds") {
        if (!value.is_number() || !(value.get<double>() > 0) || value.get<double>() > 86400)
          return "options.timeoutSeconds: expected a number of seconds in (0, 86400]";
        s->timeout_seconds = value.get<double>();
      } else {
        return "options." + key + ": unknown (remote takes: url, timeoutSeconds)";
      }
    }
    if (s->base.empty()) return "options.url: required (the environment server, http://host:port)";
    try {
      s->url = runtime::parse_http_url(s->base);
    } catch (const std::invalid_argument& e) {
      return "options.url: '" + s->base + "': " + e.what();
    }
    while (!s->base.empty() && s->base.back() == '/') s->base.pop_back();
    server_ = std::move(s);
    return "";
  }

  std::unique_ptr<episode> open(const task& t, const std::string& id) override {
    if (!server_) throw std::logic_error("remote environment: opened before configure");
    return std::make_unique<remote_episode>(server_, t, id);
  }

 private:
  std::shared_ptr<const remote_server> server_;
};

}  // namespace

std::unique_ptr<environment> make_remote_environment() { return std::make_unique<remote>(); }

}  // namespace milesrt::environment
