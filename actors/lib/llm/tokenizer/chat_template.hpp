#pragma once
/// Chat templates without Python: a model's Jinja chat template (tokenizer_config.json's
/// `chat_template`, or `chat_template.jinja` beside it, or a .jinja file the user names) compiled
/// by milesrt's Jinja engine and rendered with the variables transformers' apply_chat_template
/// passes. Plus append-only multi-turn tokenization on top of it.

#include <ctime>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "actors/lib/llm/tokenizer/bpe.hpp"

namespace milesrt::llm {

namespace jinja {
class program;
}
class tokenizer;

/// What apply_chat_template takes besides the messages.
struct chat_options {
  bool add_generation_prompt = false;
  nlohmann::ordered_json tools = nullptr;      ///< A list of tool schemas, or null.
  nlohmann::ordered_json documents = nullptr;  ///< A list of documents (RAG templates), or null.
  /// Extra keyword arguments the template reads (`enable_thinking`, `reasoning_effort`, ...); an
  /// object. They override the tokenizer's special tokens of the same name, as in transformers.
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  /// strftime_now's clock; unset: the local time when rendering.
  std::optional<std::tm> now;
};

/// Rendered text, or an error naming the template's origin and line, or the input at fault.
struct chat_render_result {
  std::string text;
  std::string error;
};

class chat_template;

/// A chat template, or one line saying why there is none (file missing, template error at a line).
struct chat_template_result {
  std::shared_ptr<const chat_template> tmpl;
  std::string error;
};

/// A compiled chat template and the special tokens it sees. Immutable; share it between threads.
class chat_template {
 public:
  /// Compiles `source`. `origin` names where it came from in errors (a file, or "DIR/
  /// tokenizer_config.json's chat_template"). `specials` are the tokenizer's special tokens
  /// (bos_token, eos_token, unk_token, pad_token: the names transformers passes), strings.
  static chat_template_result parse(
      const std::string& source, std::string origin,
      nlohmann::ordered_json specials = nlohmann::ordered_json::object());
  /// Reads and compiles a .jinja file, with `tok`'s special tokens.
  static chat_template_result from_file(const std::filesystem::path& path, const tokenizer& tok);
  /// The model's own template: tokenizer_config.json's chat_template (a string, or the "default"
  /// entry of the named list), else chat_template.jinja in the tokenizer's folder. The result has
  /// neither template nor error when the model has none.
  static chat_template_result from_model(const tokenizer& tok);
  /// `path` when not empty (--chat-template, the rollout's chatTemplate), else the model's own.
  static chat_template_result load(const std::string& path, const tokenizer& tok);

  /// Renders `messages` (a JSON array of {role, content, tool_calls?, reasoning_content?, ...}).
  chat_render_result render(const nlohmann::ordered_json& messages,
                            const chat_options& options) const;

  const std::string& origin() const { return origin_; }
  const std::string& source() const { return source_; }

  /// Internal: use parse.
  chat_template(std::shared_ptr<const jinja::program> program, std::string source,
                std::string origin, nlohmann::ordered_json specials);

 private:
  std::shared_ptr<const jinja::program> program_;
  std::string source_, origin_;
  nlohmann::ordered_json specials_;
};

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

/// Starts a conversation: renders `messages` and tokenizes the whole text (no special tokens
/// added: the template writes them, as apply_chat_template's tokenize=True does).
chat_append_result chat_start(const tokenizer& tok, const chat_template& tmpl,
                              const nlohmann::ordered_json& messages, const chat_options& options);

/// Appends ids the model sampled; their decoded text extends the state's text.
chat_state chat_append_sampled(const tokenizer& tok, chat_state state,
                               const std::vector<token_id>& sampled);

/// Appends the next turn: `messages` is the whole conversation so far (past and new messages). The
/// template's rendering of it must start with `past.text`; the new ids are `past.ids` followed by
/// the ids of the rest of the text, so history is never re-tokenized. When the template rewrites
/// the past (Qwen3 drops the reasoning of earlier assistant turns), this says so and changes
/// nothing.
chat_append_result chat_append(const tokenizer& tok, const chat_template& tmpl,
                               const chat_state& past, const nlohmann::ordered_json& messages,
                               const chat_options& options);

}  // namespace milesrt::llm
