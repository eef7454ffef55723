#include "actors/lib/agent/openai_api.hpp"

#include <cctype>
#include <limits>

#include "actors/lib/agent/conversation.hpp"
#include "runtime/core/untrusted_text.hpp"

namespace milesrt::agent {
namespace {

using ojson = nlohmann::ordered_json;

/// Reads the sampling fields of `body` into `out`; the error names the field, "" when none.
std::string read_sampling(const ojson& body, sampling_request& out) {
  if (body.contains("temperature") && !body["temperature"].is_null()) {
    const auto& t = body["temperature"];
    if (!t.is_number() || t.get<double>() < 0 || t.get<double>() > 2)
      return "temperature: expected a number in [0, 2]";
    out.temperature = t.get<double>();
    out.temperature_given = true;
  }
  if (body.contains("top_p") && !body["top_p"].is_null()) {
    const auto& p = body["top_p"];
    if (!p.is_number() || p.get<double>() <= 0 || p.get<double>() > 1)
      return "top_p: expected a number in (0, 1]";
    out.top_p = p.get<double>();
  }
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (!body.contains(key) || body[key].is_null()) continue;
    const auto& m = body[key];
    if (!m.is_number_integer() || m.get<int64_t>() < 1 ||
        m.get<int64_t>() > std::numeric_limits<uint32_t>::max())
      return std::string(key) + ": expected a whole number of at least 1";
    out.max_tokens = static_cast<uint32_t>(m.get<int64_t>());
  }
  if (body.contains("stop") && !body["stop"].is_null()) {
    const auto& s = body["stop"];
    if (s.is_string()) {
      out.stop = {s.get<std::string>()};
    } else if (s.is_array() && s.size() <= 4) {
      for (size_t i = 0; i < s.size(); ++i) {
        if (!s[i].is_string() || s[i].get<std::string>().empty())
          return "stop[" + std::to_string(i) + "]: expected a non-empty string";
        out.stop.push_back(s[i].get<std::string>());
      }
    } else {
      return "stop: expected a string or a list of at most 4 strings";
    }
  }
  if (body.contains("n") && !body["n"].is_null() &&
      (!body["n"].is_number_integer() || body["n"].get<int64_t>() != 1))
    return "n: only 1 is served (open more sessions in a group for more samples)";
  return "";
}

std::string check_tools(const ojson& tools) {
  if (!tools.is_array()) return "tools: expected a list";
  for (size_t i = 0; i < tools.size(); ++i) {
    const auto& t = tools[i];
    const std::string at = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || t.value("type", "") != "function")
      return at + ": expected an object of type \"function\"";
    if (!t.contains("function") || !t["function"].is_object() || !t["function"].contains("name") ||
        !t["function"]["name"].is_string())
      return at + ".function.name: expected a string";
    if (t["function"].contains("parameters") && !t["function"]["parameters"].is_object())
      return at + ".function.parameters: expected an object";
  }
  return "";
}

std::string check_tool_choice(const ojson& c) {
  if (c.is_string()) {
    const auto s = c.get<std::string>();
    if (s == "none" || s == "auto" || s == "required") return "";
  } else if (c.is_object() && c.value("type", "") == "function" && c.contains("function") &&
             c["function"].is_object() && c["function"].contains("name") &&
             c["function"]["name"].is_string()) {
    return "";
  }
  return "tool_choice: expected \"none\", \"auto\", \"required\" or "
         "{\"type\": \"function\", \"function\": {\"name\": ...}}";
}

/// `body` parsed as a JSON object, or the error.
ojson parse_object(std::string_view body, std::string& error) {
  // Bounded before parsing: the checks below copy and walk the value, once per level.
  if (auto deep = runtime::json_nesting_problem(body); !deep.empty()) {
    error = "body: " + deep;
    return nullptr;
  }
  auto v = ojson::parse(body.begin(), body.end(), nullptr, false);
  if (v.is_discarded()) {
    error = "body: not valid JSON";
  } else if (!v.is_object()) {
    error = "body: expected a JSON object";
  }
  return v;
}

}  // namespace

chat_request_result parse_chat_request(std::string_view text) {
  chat_request_result out;
  auto body = parse_object(text, out.error);
  if (!out.error.empty()) return out;
  auto& r = out.request;
  auto fail = [&](std::string e) {
    out.error = std::move(e);
    return out;
  };
  if (!body.contains("messages")) return fail("messages: required");
  if (auto e = check_messages(body["messages"]); !e.empty()) return fail(e);
  if (body["messages"].empty()) return fail("messages: expected at least one message");
  r.messages = body["messages"];
  if (body.contains("model") && !body["model"].is_null()) {
    if (!body["model"].is_string()) return fail("model: expected a string");
    r.model = body["model"].get<std::string>();
  }
  if (body.contains("tools") && !body["tools"].is_null()) {
    if (auto e = check_tools(body["tools"]); !e.empty()) return fail(e);
    if (!body["tools"].empty()) r.tools = body["tools"];
  }
  if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
    if (auto e = check_tool_choice(body["tool_choice"]); !e.empty()) return fail(e);
    r.tool_choice = body["tool_choice"];
  }
  if (auto e = read_sampling(body, r.sampling); !e.empty()) return fail(e);
  if (body.contains("stream") && !body["stream"].is_null()) {
    if (!body["stream"].is_boolean()) return fail("stream: expected true or false");
    r.stream = body["stream"].get<bool>();
  }
  if (body.contains("stream_options") && !body["stream_options"].is_null()) {
    const auto& o = body["stream_options"];
    if (!o.is_object() || (o.contains("include_usage") && !o["include_usage"].is_boolean()))
      return fail("stream_options: expected {\"include_usage\": true or false}");
    r.include_usage = o.value("include_usage", false);
  }
  if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
    if (!body["chat_template_kwargs"].is_object())
      return fail("chat_template_kwargs: expected an object");
    r.template_kwargs = body["chat_template_kwargs"];
  }
  return out;
}

generate_request_result parse_generate_request(std::string_view text) {
  generate_request_result out;
  auto body = parse_object(text, out.error);
  if (!out.error.empty()) return out;
  if (!body.contains("input_ids") || !body["input_ids"].is_array() || body["input_ids"].empty()) {
    out.error = "input_ids: expected a non-empty list of token ids";
    return out;
  }
  const auto& ids = body["input_ids"];
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!ids[i].is_number_integer() || ids[i].get<int64_t>() < 0 ||
        ids[i].get<int64_t>() > std::numeric_limits<llm::token_id>::max()) {
      out.error = "input_ids[" + std::to_string(i) + "]: expected a token id (a whole number >= 0)";
      return out;
    }
    out.request.input_ids.push_back(static_cast<llm::token_id>(ids[i].get<int64_t>()));
  }
  out.error = read_sampling(body, out.request.sampling);
  return out;
}

std::string finish_reason(const parsed_reply& reply, bool hit_limit) {
  if (!reply.tool_calls.empty()) return "tool_calls";
  return hit_limit ? "length" : "stop";
}

ojson completion_body(const std::string& id, const std::string& model, int64_t created,
                      const parsed_reply& reply, const std::string& finish,
                      const usage_counts& usage) {
  return {{"id", id},
          {"object", "chat.completion"},
          {"created", created},
          {"model", model},
          {"choices", ojson::array({{{"index", 0},
                                     {"message", assistant_message(reply)},
                                     {"logprobs", nullptr},
                                     {"finish_reason", finish}}})},
          {"usage",
           {{"prompt_tokens", usage.prompt_tokens},
            {"completion_tokens", usage.completion_tokens},
            {"total_tokens", usage.prompt_tokens + usage.completion_tokens}}}};
}

ojson chunk_body(const std::string& id, const std::string& model, int64_t created, ojson delta,
                 const std::string& finish) {
  return {{"id", id},
          {"object", "chat.completion.chunk"},
          {"created", created},
          {"model", model},
          {"choices",
           ojson::array({{{"index", 0},
                          {"delta", std::move(delta)},
                          {"logprobs", nullptr},
                          {"finish_reason", finish.empty() ? ojson(nullptr) : ojson(finish)}}})}};
}

std::string error_field(const std::string& error) {
  auto colon = error.find(": ");
  if (colon == std::string::npos || colon == 0) return "";
  auto field = error.substr(0, colon);
  if (field == "body") return "";
  for (char c : field)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '[' ||
          c == ']'))
      return "";
  return field;
}

ojson error_body(unsigned status, const std::string& message, const std::string& param) {
  const char* type = status == 401   ? "authentication_error"
                     : status == 404 ? "not_found_error"
                     : status == 409 ? "conflict_error"
                     : status == 413 ? "request_too_large"
                     : status == 429 ? "rate_limit_error"
                     : status >= 500 ? "server_error"
                                     : "invalid_request_error";
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? ojson(nullptr) : ojson(param)},
            {"code", nullptr}}}};
}

}  // namespace milesrt::agent
