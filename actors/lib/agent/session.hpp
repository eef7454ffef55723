#pragma once
/// One agent session's exact tokens (token in, token out): the sequence the model saw and wrote,
/// each token marked as sampled (with its log-prob and the weight version it was sampled under)
/// or supplied by the environment (the chat template's text around the messages, the user's and
/// tools' messages). A request's messages must extend the session's; only the new messages'
/// tokens are appended, so tokens already in the session, sampled ones above all, never change,
/// even under a template that rewrites history (Qwen3 drops earlier reasoning).

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "actors/lib/llm/tokenizer/bpe.hpp"
#include "actors/lib/llm/tokenizer/chat_template.hpp"

namespace milesrt::llm {
class tokenizer;
}

namespace milesrt::agent {

enum class token_origin : uint8_t {
  environment,  ///< the template, the user, a tool: context, not trained on
  sampled,      ///< the model wrote it
};

/// A session's tokens in order, one entry per token in each list. Environment tokens have
/// log-prob 0 and version 0.
struct session_tokens {
  std::vector<llm::token_id> ids;
  std::vector<token_origin> origins;
  std::vector<float> logprobs;
  std::vector<uint64_t> versions;
  size_t size() const { return ids.size(); }
};

/// Why a request cannot extend a session; the session is unchanged.
struct session_error {
  enum class kind {
    bad_request,       ///< malformed messages or ids (HTTP 400); `message` names the field
    not_an_extension,  ///< the stored messages (or ids) are not a prefix of the request's (409)
    wrong_mode,        ///< messages for a session driven by ids, or ids for one of messages (409)
    template_failed,   ///< the chat template raised, or its rendering cannot be split (500)
    too_long,          ///< the sequence would pass the session's token limit (413)
  };
  kind what = kind::bad_request;
  std::string message;
  /// For not_an_extension: the first message (or id) that differs.
  std::optional<size_t> index;
};

/// What an extension appended.
struct extend_result {
  size_t appended = 0;  ///< environment tokens added
  std::optional<session_error> error;
};

/// Where a session stood before a turn: undo() goes back to it when the turn fails or its
/// client leaves, so that nothing of a turn that was never answered stays in the session.
struct session_mark {
  size_t tokens = 0, messages = 0, text = 0, turns = 0;
  int mode = 0;
};

/// The token a chat template closes an assistant message with (`<|im_end|>`, `<|eot_id|>`): the
/// first token of what it renders after a reply's content, when that is a special token; -1 when
/// the template closes replies otherwise or cannot render a short conversation.
llm::token_id end_of_turn_token(const llm::tokenizer& tok, const llm::chat_template& tmpl);

class session {
 public:
  /// `tmpl` may be null for a session driven by ids only. `max_tokens` (0: none) bounds the
  /// sequence an extension may make (the model's context, less room to answer). `vocab_size`
  /// (0: the tokenizer's ids are not checked) bounds the ids a harness may send.
  session(std::shared_ptr<const llm::tokenizer> tok, std::shared_ptr<const llm::chat_template> tmpl,
          size_t max_tokens = 0, int64_t vocab_size = 0);

  /// Takes a request's whole conversation. Its first messages must be the session's (compared
  /// by same_message: a client may reshape what it was answered); the conversation is rendered
  /// with the chat template and a generation prompt, and the tokens of the text that follows
  /// the session's own text there are appended as environment tokens. Where the rendering does
  /// not begin with the session's text (the template rewrote earlier turns, or writes an
  /// answered tool call otherwise than the model did), the session's text is located in it from
  /// its end (see session.cpp).
  extend_result extend(const nlohmann::ordered_json& messages, const llm::chat_options& options);

  /// For harnesses that tokenize themselves: `ids` is the whole sequence so far, and must begin
  /// with the session's ids; the rest is appended as environment tokens.
  extend_result extend_ids(const std::vector<llm::token_id>& ids);

  /// Records a turn the model sampled: its ids, their log-probs and the version they were
  /// sampled under, and (for a session of messages) the assistant message the client was given,
  /// which its next request must repeat. Throws std::invalid_argument on lists of unequal size
  /// (a bug of the caller).
  void append_sampled(const std::vector<llm::token_id>& ids, const std::vector<float>& logprobs,
                      uint64_t version, nlohmann::ordered_json reply = nullptr);
  /// The same with each token's own version (a turn sampled across a weight update).
  void append_sampled(const std::vector<llm::token_id>& ids, const std::vector<float>& logprobs,
                      const std::vector<uint64_t>& versions,
                      nlohmann::ordered_json reply = nullptr);

  /// Closes a turn the model did not end itself (max_tokens, a stop string) as the template
  /// closes an assistant message: its end-of-turn token, as an environment token. Nothing for a
  /// session of ids (its harness tokenizes the rest itself) or a template without such a token.
  void close_open_turn();

  /// Where the session stands now; undo(mark) takes back everything since (a failed turn).
  session_mark mark() const;
  void undo(const session_mark& m);

  const session_tokens& tokens() const { return tokens_; }
  const std::shared_ptr<const llm::tokenizer>& tokenizer() const { return tok_; }
  /// The end-of-turn token close_open_turn() appends (-1: none).
  llm::token_id end_of_turn() const { return end_of_turn_; }
  /// The conversation so far (the client's messages and the replies), for a session of messages.
  const nlohmann::ordered_json& messages() const { return messages_; }
  /// The text of the tokens: the rendered text and the sampled tokens' decoded text.
  const std::string& text() const { return text_; }
  /// Sampled turns so far.
  size_t turns() const { return turns_; }

 private:
  enum class mode { unset, messages, ids };
  std::optional<session_error> take_mode(mode m);
  /// too_long when `adding` more tokens would pass max_tokens_.
  std::optional<session_error> room_for(size_t adding) const;
  void append_environment(const std::vector<llm::token_id>& ids);

  std::shared_ptr<const llm::tokenizer> tok_;
  std::shared_ptr<const llm::chat_template> tmpl_;
  size_t max_tokens_ = 0;
  int64_t vocab_size_ = 0;
  llm::token_id end_of_turn_ = -1;
  mode mode_ = mode::unset;
  session_tokens tokens_;
  nlohmann::ordered_json messages_ = nlohmann::ordered_json::array();
  std::string text_;
  size_t turns_ = 0;
};

/// Where `session_text` ends within `rendering` (the rendering of a conversation that extends
/// the session's): its length when `rendering` begins with it; otherwise the position between
/// `last_part` (where the session's last message is known to have begun) and `new_part` (where
/// the new messages' content is known to have begun) whose preceding text shares the longest
/// ending with `session_text`, the first such on a tie; nullopt when none shares any.
std::optional<size_t> session_text_end(const std::string& session_text,
                                       const std::string& rendering, size_t last_part,
                                       size_t new_part);

}  // namespace milesrt::agent
