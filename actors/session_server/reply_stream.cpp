#include "actors/session_server/reply_stream.hpp"

#include <algorithm>

namespace milesrt::session_server {
namespace {
using json = nlohmann::ordered_json;

constexpr std::string_view kSpace = " \t\r\n";

std::string_view ltrim(std::string_view s) {
  auto b = s.find_first_not_of(kSpace);
  return b == std::string_view::npos ? std::string_view{} : s.substr(b);
}

std::string_view rtrim(std::string_view s) {
  auto e = s.find_last_not_of(kSpace);
  return e == std::string_view::npos ? std::string_view{} : s.substr(0, e + 1);
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

/// The length of the longest end of `s` that begins `marker` (without being all of it): text
/// that may yet become the marker.
size_t partial_marker(std::string_view s, std::string_view marker) {
  for (size_t k = std::min(s.size(), marker.size() - 1); k > 0; --k) {
    if (s.substr(s.size() - k) == marker.substr(0, k)) return k;
  }
  return 0;
}

std::string_view hold_back(std::string_view s, std::string_view marker) {
  return s.substr(0, s.size() - partial_marker(s, marker));
}

/// The rest of `now` beyond `sent` ("" when `now` does not extend it).
std::string beyond(const std::string& sent, const std::string& now) {
  if (now.size() <= sent.size() || now.compare(0, sent.size(), sent) != 0) return "";
  return now.substr(sent.size());
}

/// The settled content of `rest` (the text after any reasoning).
std::string settled_content(std::string_view rest, agent::tool_call_format format) {
  auto c = ltrim(rest);
  if (format == agent::tool_call_format::hermes) {
    auto call = c.find("<tool_call>");
    c = call != std::string_view::npos ? c.substr(0, call) : hold_back(c, "<tool_call>");
  } else if (format == agent::tool_call_format::llama3_json) {
    // The reply may be one JSON call: nothing is settled until it is over.
    const std::string_view tag = "<|python_tag|>";
    if (starts_with(c, "{") || starts_with(c, tag) || (!c.empty() && starts_with(tag, c)))
      return "";
  }
  // A `</think>` to come would make what came before it reasoning: held back, not sent.
  c = hold_back(c, "</think>");
  return std::string(rtrim(c));
}

}  // namespace

std::string cut_at_stop(std::string_view text, const std::vector<std::string>& stop) {
  size_t at = text.size();
  for (const auto& s : stop) {
    if (s.empty()) continue;
    at = std::min(at, text.find(s));
  }
  return std::string(text.substr(0, at));
}

settled_text settle_text(std::string_view full, agent::tool_call_format format, bool think_open,
                         const std::vector<std::string>& stop) {
  // A character split across tokens decodes as U+FFFD until its last byte is sampled: held back,
  // or the text sent would stop being a prefix of the text to come.
  const std::string_view replacement = "\xEF\xBF\xBD";
  while (full.size() >= replacement.size() &&
         full.substr(full.size() - replacement.size()) == replacement)
    full.remove_suffix(replacement.size());
  std::string cut = cut_at_stop(full, stop);
  std::string_view text = cut;
  if (cut.size() == full.size()) {
    size_t hold = 0;
    for (const auto& s : stop) {
      if (!s.empty()) hold = std::max(hold, partial_marker(text, s));
    }
    text = text.substr(0, text.size() - hold);
  }
  settled_text out;
  std::string_view rest = text;
  auto lt = ltrim(text);
  if (think_open || starts_with(lt, "<think>")) {
    std::string_view body = starts_with(lt, "<think>") ? lt.substr(7) : text;
    auto end = body.find("</think>");
    if (end == std::string_view::npos) {
      out.reasoning = std::string(rtrim(ltrim(hold_back(body, "</think>"))));
      return out;
    }
    out.reasoning = std::string(rtrim(ltrim(body.substr(0, end))));
    rest = body.substr(end + 8);
  } else if (!lt.empty() && starts_with("<think>", lt)) {
    return out;  // it may be opening a reasoning block
  }
  out.content = settled_content(rest, format);
  return out;
}

reply_stream::reply_stream(runtime::http_responder responder, std::string id, std::string model,
                           int64_t created)
    : responder_(std::move(responder)),
      id_(std::move(id)),
      model_(std::move(model)),
      created_(created) {}

void reply_stream::open() {
  if (opened_) return;
  opened_ = true;
  stream_ = responder_.stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
  chunk({{"role", "assistant"}, {"content", ""}}, "");
}

void reply_stream::chunk(json delta, const std::string& finish) {
  stream_.event(agent::chunk_body(id_, model_, created_, std::move(delta), finish)
                    .dump(-1, ' ', false, json::error_handler_t::replace));
}

void reply_stream::update(const settled_text& now) {
  open();
  if (auto r = beyond(sent_.reasoning, now.reasoning); !r.empty()) {
    chunk({{"reasoning_content", r}}, "");
    sent_.reasoning = now.reasoning;
  }
  if (auto c = beyond(sent_.content, now.content); !c.empty()) {
    chunk({{"content", c}}, "");
    sent_.content = now.content;
  }
}

void reply_stream::finish(const agent::parsed_reply& reply, const std::string& finish,
                          const agent::usage_counts* usage) {
  update({reply.reasoning, reply.content});
  for (size_t i = 0; i < reply.tool_calls.size(); ++i) {
    json call_delta = reply.tool_calls[i];
    call_delta["index"] = i;
    chunk({{"tool_calls", json::array({call_delta})}}, "");
  }
  chunk(json::object(), finish);
  if (usage) {
    json u = agent::chunk_body(id_, model_, created_, json::object(), "");
    u["choices"] = json::array();
    u["usage"] = {{"prompt_tokens", usage->prompt_tokens},
                  {"completion_tokens", usage->completion_tokens},
                  {"total_tokens", usage->prompt_tokens + usage->completion_tokens}};
    stream_.event(u.dump(-1, ' ', false, json::error_handler_t::replace));
  }
  stream_.event("[DONE]");
  stream_.close();
}

void reply_stream::fail(unsigned status, const std::string& message) {
  if (!opened_) return;
  stream_.event(
      agent::error_body(status, message).dump(-1, ' ', false, json::error_handler_t::replace));
  stream_.close();
}

}  // namespace milesrt::session_server
