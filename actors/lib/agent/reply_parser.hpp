#pragma once
/// What the model wrote, taken apart the way an OpenAI client expects it: reasoning
/// (`<think>...</think>`), content, and tool calls in the two forms open models are trained to
/// write — Qwen3/Hermes' `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks and
/// Llama 3.1's bare JSON object `{"name": ..., "parameters": {...}}` — as OpenAI `tool_calls`.
/// A call that cannot be read leaves the whole reply as text, and is counted; never an error.

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "actors/lib/llm/tokenizer/bpe.hpp"

namespace milesrt::llm {
class tokenizer;
}

namespace milesrt::agent {

enum class tool_call_format {
  none,         ///< the template has no tool calls: replies are text
  hermes,       ///< `<tool_call>{json}</tool_call>` blocks (Qwen2.5/3, QwQ, Hermes)
  llama3_json,  ///< the reply is one JSON object `{"name", "parameters"}` (Llama 3.1/3.2/3.3)
};

/// The form a chat template's model writes its calls in, read from the template's source:
/// `hermes` when it writes `<tool_call>`, `llama3_json` when it asks for a JSON function call
/// with `parameters`, `none` otherwise.
tool_call_format detect_tool_call_format(std::string_view template_source);

/// A reply taken apart.
struct parsed_reply {
  /// What is left of the text: outside the tool calls and the reasoning, trimmed.
  std::string content;
  /// The text of a leading `<think>...</think>` (or of all before a `</think>` when the
  /// generation prompt opened the block); "" when none.
  std::string reasoning;
  /// OpenAI form: `[{"id", "type": "function", "function": {"name", "arguments": JSON string}}]`.
  nlohmann::ordered_json tool_calls = nlohmann::ordered_json::array();
  /// Calls that could not be read (broken JSON, no name, an unclosed block): the reply is then
  /// given as text, whole (its tool calls none).
  size_t malformed = 0;
};

/// The text parse_reply reads from a reply's ids: decoded with its special tokens (a tokenizer
/// may mark `<think>` or `<tool_call>` special), less the end-of-turn tokens it ends with
/// (`stop_ids`; the tokenizer's eos_token when empty).
std::string reply_text(const llm::tokenizer& tok, const std::vector<llm::token_id>& ids,
                       const std::vector<llm::token_id>& stop_ids = {});

/// Takes `text` apart (the reply's text, special tokens such as the end-of-turn removed). Call
/// ids are `id_prefix` followed by the call's index ("call_3_0", ...).
parsed_reply parse_reply(std::string_view text, tool_call_format format,
                         const std::string& id_prefix);

/// The assistant message of a parsed reply: `role`, `content` (null when there are tool calls
/// and no text), `tool_calls` when there are any, `reasoning_content` when there is reasoning.
nlohmann::ordered_json assistant_message(const parsed_reply& reply);

}  // namespace milesrt::agent
