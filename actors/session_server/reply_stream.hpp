#pragma once
/// A chat reply streamed as the engine samples it: which part of the text so far is settled (it
/// stays what it is whatever the model writes next: reasoning, content, not a tool call's JSON,
/// not a stop string's beginning), and the server-sent events of one streamed answer. A stream
/// sends only settled text, so the chunks add up to the final reply's reasoning and content
/// (the final chunk carries the rest, the tool calls and the finish reason).
///
/// Stop strings: sampling stops at the token whose text completed one; the reply's text ends
/// before the first stop string found (the string itself is not returned), while the session
/// keeps every sampled token, the completing one included.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "actors/lib/agent/openai_api.hpp"
#include "actors/lib/agent/reply_parser.hpp"
#include "runtime/http/http_responder.hpp"

namespace milesrt::session_server {

/// `text` up to the first occurrence of a stop string (the earliest one found), else whole.
std::string cut_at_stop(std::string_view text, const std::vector<std::string>& stop);

/// The settled part of a reply's text so far.
struct settled_text {
  std::string reasoning, content;
};

/// What of `text` (the reply's text so far) is settled. Reasoning is the text of a leading
/// `<think>` block, or (`think_open`: the prompt opened the block) all before `</think>`.
settled_text settle_text(std::string_view text, agent::tool_call_format format, bool think_open,
                         const std::vector<std::string>& stop);

/// One streamed chat answer (`chat.completion.chunk` events, then `data: [DONE]`). Opened with
/// its role chunk by the first update; a turn that fails before it opened is answered whole.
class reply_stream {
 public:
  reply_stream(runtime::http_responder responder, std::string id, std::string model,
               int64_t created);
  /// Sends the settled text beyond what was sent (opening the stream first).
  void update(const settled_text& now);
  /// Sends the rest of `reply`'s reasoning and content, its tool calls, the finish reason, the
  /// usage when given, `[DONE]`, and ends the answer.
  void finish(const agent::parsed_reply& reply, const std::string& finish,
              const agent::usage_counts* usage);
  /// Ends an opened stream with an error event (OpenAI's error object).
  void fail(unsigned status, const std::string& message);
  bool opened() const { return opened_; }
  /// Whether the client has gone.
  bool gone() const { return responder_.disconnected(); }

 private:
  void open();
  void chunk(nlohmann::ordered_json delta, const std::string& finish);

  runtime::http_responder responder_;
  runtime::http_stream stream_;
  std::string id_, model_;
  int64_t created_ = 0;
  bool opened_ = false;
  settled_text sent_;
};

}  // namespace milesrt::session_server
