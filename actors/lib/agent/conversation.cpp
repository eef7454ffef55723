#include "actors/lib/agent/conversation.hpp"

namespace milesrt::agent {
namespace {

using ojson = nlohmann::ordered_json;

std::string check_content(const ojson& c, const std::string& at) {
  if (c.is_null() || c.is_string()) return "";
  if (!c.is_array()) return at + ": expected a string, null or a list of parts";
  for (size_t i = 0; i < c.size(); ++i) {
    const auto& part = c[i];
    const std::string here = at + "[" + std::to_string(i) + "]";
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      return here + ": expected an object with a string type";
    if (part["type"] == "text" && (!part.contains("text") || !part["text"].is_string()))
      return here + ".text: expected a string";
  }
  return "";
}

std::string check_tool_calls(const ojson& calls, const std::string& at) {
  if (calls.is_null()) return "";
  if (!calls.is_array()) return at + ": expected a list";
  for (size_t i = 0; i < calls.size(); ++i) {
    const auto& call = calls[i];
    const std::string here = at + "[" + std::to_string(i) + "]";
    if (!call.is_object()) return here + ": expected an object";
    if (call.contains("id") && !call["id"].is_string()) return here + ".id: expected a string";
    if (!call.contains("function") || !call["function"].is_object())
      return here + ".function: expected an object";
    const auto& f = call["function"];
    if (!f.contains("name") || !f["name"].is_string())
      return here + ".function.name: expected a string";
    if (f.contains("arguments") && !f["arguments"].is_string() && !f["arguments"].is_object())
      return here + ".function.arguments: expected a string or an object";
  }
  return "";
}

/// Content as text: null and "" alike, a list of parts as its text parts joined (other parts as
/// their JSON, so that they still count).
std::string content_text(const ojson& m) {
  if (!m.contains("content")) return "";
  const auto& c = m["content"];
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) return "";
  std::string out;
  for (const auto& part : c)
    out += part.value("type", "") == "text" ? part["text"].get<std::string>() : part.dump();
  return out;
}

std::string string_field(const ojson& m, const char* key) {
  return m.contains(key) && m[key].is_string() ? m[key].get<std::string>() : "";
}

/// Arguments as JSON: a string that parses as JSON is that JSON; one that does not stays a string.
ojson arguments_of(const ojson& f) {
  if (!f.contains("arguments")) return ojson::object();
  const auto& a = f["arguments"];
  if (!a.is_string()) return a;
  auto parsed = ojson::parse(a.get<std::string>(), nullptr, false);
  return parsed.is_discarded() ? a : parsed;
}

bool same_calls(const ojson& a, const ojson& b) {
  const ojson none = ojson::array();
  const ojson& x = a.contains("tool_calls") && a["tool_calls"].is_array() ? a["tool_calls"] : none;
  const ojson& y = b.contains("tool_calls") && b["tool_calls"].is_array() ? b["tool_calls"] : none;
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i].contains("id") && y[i].contains("id") && x[i]["id"] != y[i]["id"]) return false;
    const auto &f = x[i]["function"], &g = y[i]["function"];
    if (f["name"] != g["name"] || arguments_of(f) != arguments_of(g)) return false;
  }
  return true;
}

}  // namespace

std::string check_messages(const ojson& messages) {
  if (!messages.is_array()) return "messages: expected a list";
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return at + ": expected an object";
    if (!m.contains("role") || !m["role"].is_string()) return at + ".role: expected a string";
    if (m.contains("content"))
      if (auto e = check_content(m["content"], at + ".content"); !e.empty()) return e;
    if (m.contains("tool_calls"))
      if (auto e = check_tool_calls(m["tool_calls"], at + ".tool_calls"); !e.empty()) return e;
    for (const char* key : {"tool_call_id", "name"})
      if (m.contains(key) && !m[key].is_string() && !m[key].is_null())
        return at + "." + key + ": expected a string";
  }
  return "";
}

bool same_message(const ojson& a, const ojson& b) {
  return a["role"] == b["role"] && content_text(a) == content_text(b) && same_calls(a, b) &&
         string_field(a, "tool_call_id") == string_field(b, "tool_call_id") &&
         string_field(a, "name") == string_field(b, "name");
}

std::optional<size_t> first_difference(const ojson& stored, const ojson& request) {
  for (size_t i = 0; i < stored.size(); ++i)
    if (i >= request.size() || !same_message(stored[i], request[i])) return i;
  return std::nullopt;
}

ojson template_messages(const ojson& messages) {
  ojson out = messages;
  for (auto& m : out) {
    // Templates treat content as a string (Qwen3's tests `'</think>' in message.content`).
    if (!m.contains("content") || m["content"].is_null()) m["content"] = "";
    if (m["content"].is_array()) {
      bool all_text = true;
      for (const auto& part : m["content"]) all_text = all_text && part.value("type", "") == "text";
      if (all_text) m["content"] = content_text(m);
    }
    if (!m.contains("tool_calls") || !m["tool_calls"].is_array()) continue;
    for (auto& call : m["tool_calls"]) {
      auto& f = call["function"];
      if (f.contains("arguments") && f["arguments"].is_string()) {
        auto parsed = ojson::parse(f["arguments"].get<std::string>(), nullptr, false);
        if (!parsed.is_discarded() && parsed.is_object()) f["arguments"] = std::move(parsed);
      }
    }
  }
  return out;
}

}  // namespace milesrt::agent
