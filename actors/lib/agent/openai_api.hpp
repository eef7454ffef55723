#pragma once
/// The OpenAI chat completions protocol as a session server speaks it, without the server: a
/// request body checked field by field (the error names the field: HTTP 400), and the bodies of
/// an answer, of a streamed answer's chunks and of an error. Also the body of the token-level
/// `generate` request.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "actors/lib/agent/reply_parser.hpp"
#include "actors/lib/llm/tokenizer/bpe.hpp"

namespace milesrt::agent {

/// How to sample one turn.
struct sampling_request {
  double temperature = 1.0;
  bool temperature_given = false;  ///< the request named a temperature
  double top_p = 1.0;
  uint32_t max_tokens = 0;  ///< 0: the server's limit
  std::vector<std::string> stop;
};

/// A checked `POST .../chat/completions` body.
struct chat_request {
  nlohmann::ordered_json messages;
  nlohmann::ordered_json tools = nullptr;        ///< a list of tools, or null
  nlohmann::ordered_json tool_choice = nullptr;  ///< "none", "auto", "required", an object, null
  sampling_request sampling;
  bool stream = false;
  bool include_usage = false;  ///< stream_options.include_usage
  std::string model;
  /// `chat_template_kwargs` (an object): extra variables for the chat template.
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
};

/// A request or why it is refused, naming the field ("temperature: expected a number in
/// [0, 2]"); unknown fields are ignored, as OpenAI's own server ignores fields it does not use.
struct chat_request_result {
  chat_request request;
  std::string error;
};
chat_request_result parse_chat_request(std::string_view body);

/// A checked `POST /sessions/{id}/generate` body: `input_ids` (the whole sequence so far) and
/// the sampling fields of a chat request.
struct generate_request {
  std::vector<llm::token_id> input_ids;
  sampling_request sampling;
};
struct generate_request_result {
  generate_request request;
  std::string error;
};
generate_request_result parse_generate_request(std::string_view body);

/// Token counts of a turn.
struct usage_counts {
  uint64_t prompt_tokens = 0, completion_tokens = 0;
};

/// "tool_calls" when the reply has tool calls, else "length" when it stopped at its limit, else
/// "stop".
std::string finish_reason(const parsed_reply& reply, bool hit_limit);

/// A `chat.completion` object of one choice.
nlohmann::ordered_json completion_body(const std::string& id, const std::string& model,
                                       int64_t created, const parsed_reply& reply,
                                       const std::string& finish, const usage_counts& usage);

/// A `chat.completion.chunk` object: `delta` (role, content, tool_calls ...) and, for the last,
/// a finish reason ("" for none yet).
nlohmann::ordered_json chunk_body(const std::string& id, const std::string& model, int64_t created,
                                  nlohmann::ordered_json delta, const std::string& finish);

/// The field an error of this library names ("messages[2].content" of "messages[2].content:
/// expected ..."); "" when it names none.
std::string error_field(const std::string& error);

/// `{"error": {"message", "type", "param", "code"}}` as OpenAI answers errors; `param` names the
/// field at fault ("" for none), `type` follows the status (invalid_request_error, ...).
nlohmann::ordered_json error_body(unsigned status, const std::string& message,
                                  const std::string& param = "");

}  // namespace milesrt::agent
