#include "actors/lib/agent/reply_parser.hpp"

#include <algorithm>
#include <optional>

#include "actors/lib/llm/tokenizer/tokenizer.hpp"

namespace milesrt::agent {
namespace {

using ojson = nlohmann::ordered_json;

std::string_view trim(std::string_view s) {
  const char* space = " \t\r\n";
  auto b = s.find_first_not_of(space);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(space) - b + 1);
}

/// One call from its JSON: an object with a string `name` and an object (or a JSON string of an
/// object) under `args_key` or, failing that, the other of "arguments" / "parameters".
std::optional<ojson> read_call(std::string_view json, const std::string& id) {
  auto v = ojson::parse(json.begin(), json.end(), nullptr, false);
  if (v.is_discarded() || !v.is_object() || !v.contains("name") || !v["name"].is_string())
    return std::nullopt;
  ojson args = ojson::object();
  for (const char* key : {"arguments", "parameters"}) {
    if (!v.contains(key)) continue;
    args = v[key];
    if (args.is_string()) args = ojson::parse(args.get<std::string>(), nullptr, false);
    break;
  }
  if (args.is_discarded() || !args.is_object()) return std::nullopt;
  return ojson{{"id", id},
               {"type", "function"},
               {"function", {{"name", v["name"]}, {"arguments", args.dump()}}}};
}

/// Splits off the reasoning: a leading <think>...</think>, or all before a </think> when no
/// <think> opens it (the generation prompt did).
void split_reasoning(std::string_view& text, parsed_reply& out) {
  const std::string_view open = "<think>", close = "</think>";
  auto end = text.find(close);
  if (end == std::string_view::npos) return;
  auto t = trim(text);
  auto start = text.find(open);
  if (start != std::string_view::npos && t.substr(0, open.size()) != open) return;
  const size_t from = start == std::string_view::npos ? 0 : start + open.size();
  if (from > end) return;
  out.reasoning = std::string(trim(text.substr(from, end - from)));
  text = text.substr(end + close.size());
}

void parse_hermes(std::string_view text, const std::string& id_prefix, parsed_reply& out) {
  const std::string_view open = "<tool_call>", close = "</tool_call>";
  std::string content;
  ojson calls = ojson::array();
  size_t at = 0;
  while (true) {
    auto start = text.find(open, at);
    if (start == std::string_view::npos) {
      content += text.substr(at);
      break;
    }
    content += text.substr(at, start - at);
    auto end = text.find(close, start + open.size());
    auto call = end == std::string_view::npos
                    ? std::nullopt
                    : read_call(trim(text.substr(start + open.size(), end - start - open.size())),
                                id_prefix + std::to_string(calls.size()));
    if (!call) {
      ++out.malformed;
      if (end == std::string_view::npos) break;
    } else {
      calls.push_back(std::move(*call));
    }
    at = end + close.size();
  }
  if (out.malformed) return;  // the whole reply stays text
  out.content = std::string(trim(content));
  out.tool_calls = std::move(calls);
}

void parse_llama3(std::string_view text, const std::string& id_prefix, parsed_reply& out) {
  auto t = trim(text);
  const std::string_view tag = "<|python_tag|>";
  if (t.substr(0, tag.size()) == tag) t = trim(t.substr(tag.size()));
  if (t.empty() || t.front() != '{') return;  // plain text
  auto call = read_call(t, id_prefix + "0");
  if (!call) {
    ++out.malformed;
    return;
  }
  out.content.clear();
  out.tool_calls.push_back(std::move(*call));
}

}  // namespace

std::string reply_text(const llm::tokenizer& tok, const std::vector<llm::token_id>& ids,
                       const std::vector<llm::token_id>& stop_ids) {
  std::vector<llm::token_id> stops = stop_ids;
  if (stops.empty() && tok.token_to_id(tok.eos_token()) >= 0)
    stops.push_back(tok.token_to_id(tok.eos_token()));
  size_t n = ids.size();
  while (n > 0 && std::find(stops.begin(), stops.end(), ids[n - 1]) != stops.end()) --n;
  return tok.decode(
      std::vector<llm::token_id>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n)));
}

tool_call_format detect_tool_call_format(std::string_view source) {
  if (source.find("<tool_call>") != std::string_view::npos) return tool_call_format::hermes;
  if (source.find("\"parameters\"") != std::string_view::npos &&
      source.find("function call") != std::string_view::npos)
    return tool_call_format::llama3_json;
  return tool_call_format::none;
}

parsed_reply parse_reply(std::string_view text, tool_call_format format,
                         const std::string& id_prefix) {
  parsed_reply out;
  split_reasoning(text, out);
  out.content = std::string(trim(text));
  if (format == tool_call_format::hermes) parse_hermes(text, id_prefix, out);
  if (format == tool_call_format::llama3_json) parse_llama3(text, id_prefix, out);
  return out;
}

ojson assistant_message(const parsed_reply& reply) {
  ojson m = {{"role", "assistant"}};
  if (reply.content.empty() && !reply.tool_calls.empty())
    m["content"] = nullptr;
  else
    m["content"] = reply.content;
  if (!reply.tool_calls.empty()) m["tool_calls"] = reply.tool_calls;
  if (!reply.reasoning.empty()) m["reasoning_content"] = reply.reasoning;
  return m;
}

}  // namespace milesrt::agent
