#pragma once
/// Chat templates without Python: the Qwen2.5, Qwen3 and Llama-3.1/3.3 templates written out in
/// C++, giving the same text as transformers' apply_chat_template on their Jinja source. Plus
/// append-only multi-turn tokenization on top of them.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/lib/llm/tokenizer/bpe.hpp"

namespace milesrt::llm {

class tokenizer;

/// The template families milesrt renders.
enum class chat_family { qwen2_5, qwen3, llama3 };

/// "qwen2.5" (also "qwen2_5", "qwen2"), "qwen3", "llama3" (also "llama3.1", "llama3.3").
std::optional<chat_family> parse_chat_family(std::string_view name);
/// The family's name as parse_chat_family reads it.
std::string chat_family_name(chat_family f);
/// Recognises a tokenizer_config.json chat_template by its markers; nullopt when unknown.
std::optional<chat_family> detect_chat_family(const std::string& jinja);

/// What apply_chat_template takes besides the messages.
struct chat_options {
  bool add_generation_prompt = false;
  std::optional<bool> enable_thinking;       ///< Qwen3: false adds an empty <think></think>.
  nlohmann::ordered_json tools = nullptr;     ///< A list of tool schemas, or null.
  std::string bos_token;                      ///< Llama-3 starts with it.
};

/// Rendered text, or an error naming the message at fault.
struct chat_render_result {
  std::string text;
  std::string error;
};

/// Renders `messages` (a JSON array of {role, content, tool_calls?, reasoning_content?}).
chat_render_result render_chat(chat_family family, const nlohmann::ordered_json& messages,
                               const chat_options& options);

/// A conversation already tokenized: the exact ids (prompt ids plus sampled ids) and their text.
struct chat_state {
  std::string text;
  std::vector<token_id> ids;
};

/// Result of an append: the new state, or why the template cannot append without changing history.
struct chat_append_result {
  chat_state state;
  std::string error;
};

/// Starts a conversation: renders `messages` and tokenizes the whole text.
chat_append_result chat_start(const tokenizer& tok, chat_family family,
                              const nlohmann::ordered_json& messages, const chat_options& options);

/// Appends ids the model sampled; their decoded text extends the state's text.
chat_state chat_append_sampled(const tokenizer& tok, chat_state state, const std::vector<token_id>& sampled);

/// Appends the next turn: `messages` is the whole conversation so far (past and new messages). The
/// template's rendering of it must start with `past.text`; the new ids are `past.ids` followed by
/// the ids of the rest of the text, so history is never re-tokenized. When the template rewrites
/// the past (Qwen3 drops the reasoning of earlier assistant turns), this says so and changes nothing.
chat_append_result chat_append(const tokenizer& tok, chat_family family, const chat_state& past,
                               const nlohmann::ordered_json& messages, const chat_options& options);

/// Python's json.dumps(x, ensure_ascii=False[, indent=N]) as the templates' `tojson` writes it.
std::string python_json(const nlohmann::ordered_json& x, int indent = -1);

}  // namespace milesrt::llm
