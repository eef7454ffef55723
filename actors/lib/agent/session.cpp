// A session's tokens. The one delicate step is finding, in the rendering of a request's
// conversation, where the session's own text ends, so that exactly the new messages' text is
// tokenized and appended:
//  - usually the rendering begins with the session's text (the rendered prompts and the sampled
//    replies), and the new text is the rest;
//  - a template may instead rewrite earlier turns (Qwen3 drops the reasoning of assistant turns
//    once a new user query follows) or write an answered tool call otherwise than the model did.
//    The session's tokens stay as they are; its text is then located from its end: the place in
//    the rendering, after the session's last message began and before the new messages' content
//    begins, whose preceding text shares the longest ending with the session's text (a reply's
//    last words and its end-of-turn), the first such on a tie. Both bounds are learned by
//    rendering the conversation again with that message changed at its end (its content, or its
//    first tool call's name): the two renderings part there. The lower bound keeps an earlier
//    reply with the same words from being taken for the last; the first on a tie keeps a header
//    that ends like the end-of-turn (Llama's <|end_header_id|> and <|eom_id|>) from being taken.
#include "actors/lib/agent/session.hpp"

#include <algorithm>
#include <stdexcept>

#include "actors/lib/agent/conversation.hpp"
#include "actors/lib/llm/tokenizer/tokenizer.hpp"

namespace milesrt::agent {
namespace {

using ojson = nlohmann::ordered_json;

size_t common_prefix(const std::string& a, const std::string& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

/// How far back two endings are compared: enough to tell replies apart, bounded so that a long
/// run of one character cannot make the search quadratic in earnest.
constexpr size_t kEndingLimit = 4096;

/// Changes `m`'s rendering at its end: its content (a string; an empty one only when
/// `empty_ok`), else its first tool call's name. False when there is nothing to change.
bool change_end(ojson& m, bool empty_ok) {
  const std::string marker = "\x7f?";
  if (m.contains("content") && m["content"].is_string() &&
      (empty_ok || !m["content"].get<std::string>().empty())) {
    m["content"] = m["content"].get<std::string>() + marker;
    return true;
  }
  if (m.contains("tool_calls") && m["tool_calls"].is_array() && !m["tool_calls"].empty()) {
    auto& f = m["tool_calls"][0]["function"];
    f["name"] = f["name"].get<std::string>() + marker;
    return true;
  }
  return false;
}

/// Where the renderings of `messages` and of `messages` with `change` applied part: the first
/// byte that the change touched (`text.size()` when nothing changed or the template raised).
template <class Change>
size_t parting(const llm::chat_template& tmpl, const ojson& messages, const std::string& text,
               const llm::chat_options& o, Change change) {
  ojson probe = messages;
  if (!change(probe)) return text.size();
  auto other = tmpl.render(probe, o);
  return other.error.empty() ? common_prefix(text, other.text) : text.size();
}

extend_result failure(session_error::kind what, std::string message,
                      std::optional<size_t> index = std::nullopt) {
  return {0, session_error{what, std::move(message), index}};
}

}  // namespace

std::optional<size_t> session_text_end(const std::string& t, const std::string& r, size_t last_part,
                                       size_t new_part) {
  if (r.compare(0, t.size(), t) == 0) return t.size();
  const size_t from = std::max(common_prefix(t, r), last_part);
  new_part = std::min(new_part, r.size());
  size_t best = 0, best_length = 0;
  for (size_t j = from; j <= new_part; ++j) {
    size_t s = 0;
    while (s < kEndingLimit && s < j && s < t.size() && r[j - 1 - s] == t[t.size() - 1 - s]) ++s;
    if (s > best_length) {  // the first on a tie: an end-of-turn shares its ending with headers
      best_length = s;
      best = j;
    }
  }
  if (best_length == 0) return std::nullopt;
  return best;
}

llm::token_id end_of_turn_token(const llm::tokenizer& tok, const llm::chat_template& tmpl) {
  const std::string reply = "\x7fmilesrt-reply\x7f";
  const ojson probe = ojson::array(
      {{{"role", "user"}, {"content", "Hi"}}, {{"role", "assistant"}, {"content", reply}}});
  llm::chat_options o;
  o.add_generation_prompt = false;
  auto r = tmpl.render(probe, o);
  if (!r.error.empty()) return -1;
  const auto at = r.text.rfind(reply);
  if (at == std::string::npos) return -1;
  const auto after = tok.encode(std::string_view(r.text).substr(at + reply.size()), false);
  return !after.empty() && tok.is_special(after.front()) ? after.front() : -1;
}

session::session(std::shared_ptr<const llm::tokenizer> tok,
                 std::shared_ptr<const llm::chat_template> tmpl, size_t max_tokens,
                 int64_t vocab_size)
    : tok_(std::move(tok)),
      tmpl_(std::move(tmpl)),
      max_tokens_(max_tokens),
      vocab_size_(vocab_size) {
  if (!tok_) throw std::invalid_argument("agent::session: no tokenizer");
  if (tmpl_) end_of_turn_ = end_of_turn_token(*tok_, *tmpl_);
}

void session::close_open_turn() {
  if (mode_ != mode::messages || end_of_turn_ < 0) return;
  append_environment({end_of_turn_});
  text_ += tok_->decode({end_of_turn_});
}

session_mark session::mark() const {
  return {tokens_.size(), messages_.size(), text_.size(), turns_, static_cast<int>(mode_)};
}

void session::undo(const session_mark& m) {
  tokens_.ids.resize(m.tokens);
  tokens_.origins.resize(m.tokens);
  tokens_.logprobs.resize(m.tokens);
  tokens_.versions.resize(m.tokens);
  while (messages_.size() > m.messages) messages_.erase(messages_.size() - 1);
  text_.resize(m.text);
  turns_ = m.turns;
  mode_ = static_cast<mode>(m.mode);
}

std::optional<session_error> session::room_for(size_t adding) const {
  if (max_tokens_ == 0 || tokens_.size() + adding <= max_tokens_) return std::nullopt;
  return session_error{session_error::kind::too_long,
                       "the session would hold " + std::to_string(tokens_.size() + adding) +
                           " tokens, over its limit of " + std::to_string(max_tokens_),
                       std::nullopt};
}

std::optional<session_error> session::take_mode(mode m) {
  if (mode_ == mode::unset || mode_ == m) return std::nullopt;
  return session_error{session_error::kind::wrong_mode,
                       mode_ == mode::ids
                           ? "this session is driven by token ids (generate), not messages"
                           : "this session is driven by messages (chat completions), not token ids",
                       std::nullopt};
}

extend_result session::extend(const ojson& messages, const llm::chat_options& options) {
  using kind = session_error::kind;
  if (auto e = take_mode(mode::messages)) return {0, e};
  if (!tmpl_) return failure(kind::template_failed, "the model has no chat template");
  if (auto e = check_messages(messages); !e.empty()) return failure(kind::bad_request, e);
  if (auto at = first_difference(messages_, messages)) {
    if (*at >= messages.size())
      return failure(kind::not_an_extension,
                     "the request has " + std::to_string(messages.size()) +
                         " messages, fewer than the session's " + std::to_string(messages_.size()),
                     *at);
    return failure(kind::not_an_extension,
                   "messages[" + std::to_string(*at) + "] differs from the session's message " +
                       std::to_string(*at) + " (a request must extend the conversation so far)",
                   *at);
  }
  const ojson shaped = template_messages(messages);
  llm::chat_options o = options;
  o.add_generation_prompt = true;
  auto rendered = tmpl_->render(shaped, o);
  if (!rendered.error.empty()) return failure(kind::template_failed, rendered.error);
  // Bounds for locating the session's text in a rendering that does not begin with it (see
  // above): it ends after its last message's text began, and before the new messages' did.
  size_t last_part = 0, new_part = rendered.text.size();
  if (rendered.text.compare(0, text_.size(), text_) != 0) {
    const size_t stored = messages_.size();
    if (stored > 0)
      last_part = parting(*tmpl_, shaped, rendered.text, o, [&](ojson& p) {
        // A reply's text first, else its first call; an empty reply (a stop
        // string at its first character) by its empty content.
        return change_end(p[stored - 1], false) || change_end(p[stored - 1], true);
      });
    new_part = parting(*tmpl_, shaped, rendered.text, o, [&](ojson& p) {
      bool changed = false;
      for (size_t i = stored; i < p.size(); ++i) changed = change_end(p[i], true) || changed;
      return changed;
    });
  }
  auto end = session_text_end(text_, rendered.text, last_part, new_part);
  if (!end)
    return failure(kind::template_failed,
                   "the chat template (" + tmpl_->origin() +
                       ") renders the conversation so that the session's text cannot be found "
                       "in it; nothing appended");
  std::string added = rendered.text.substr(*end);
  auto ids = tok_->encode(added, false);
  if (auto e = room_for(ids.size())) return {0, e};
  append_environment(ids);
  text_ += added;
  messages_ = messages;
  mode_ = mode::messages;
  return {ids.size(), std::nullopt};
}

extend_result session::extend_ids(const std::vector<llm::token_id>& ids) {
  using kind = session_error::kind;
  if (auto e = take_mode(mode::ids)) return {0, e};
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0)
      return failure(kind::bad_request, "input_ids[" + std::to_string(i) + "]: negative id");
    if (vocab_size_ > 0 && ids[i] >= vocab_size_)
      return failure(kind::bad_request,
                     "input_ids[" + std::to_string(i) + "]: " + std::to_string(ids[i]) +
                         " is outside the model's vocabulary of " + std::to_string(vocab_size_));
  }
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (i >= ids.size())
      return failure(kind::not_an_extension,
                     "the request has " + std::to_string(ids.size()) +
                         " ids, fewer than the session's " + std::to_string(tokens_.size()),
                     i);
    if (ids[i] != tokens_.ids[i])
      return failure(kind::not_an_extension,
                     "input_ids[" + std::to_string(i) + "] is " + std::to_string(ids[i]) +
                         ", the session's is " + std::to_string(tokens_.ids[i]),
                     i);
  }
  std::vector<llm::token_id> rest(ids.begin() + static_cast<std::ptrdiff_t>(tokens_.size()),
                                  ids.end());
  if (auto e = room_for(rest.size())) return {0, e};
  append_environment(rest);
  text_ += tok_->decode(rest);
  mode_ = mode::ids;
  return {rest.size(), std::nullopt};
}

void session::append_sampled(const std::vector<llm::token_id>& ids,
                             const std::vector<float>& logprobs, uint64_t version, ojson reply) {
  append_sampled(ids, logprobs, std::vector<uint64_t>(ids.size(), version), std::move(reply));
}

void session::append_sampled(const std::vector<llm::token_id>& ids,
                             const std::vector<float>& logprobs,
                             const std::vector<uint64_t>& versions, ojson reply) {
  if (ids.size() != logprobs.size() || ids.size() != versions.size())
    throw std::invalid_argument("agent::session::append_sampled: " + std::to_string(ids.size()) +
                                " ids but " + std::to_string(logprobs.size()) + " log-probs and " +
                                std::to_string(versions.size()) + " versions");
  if (mode_ == mode::messages && reply.is_null())
    throw std::invalid_argument(
        "agent::session::append_sampled: a session of messages needs the reply message");
  tokens_.ids.insert(tokens_.ids.end(), ids.begin(), ids.end());
  tokens_.origins.insert(tokens_.origins.end(), ids.size(), token_origin::sampled);
  tokens_.logprobs.insert(tokens_.logprobs.end(), logprobs.begin(), logprobs.end());
  tokens_.versions.insert(tokens_.versions.end(), versions.begin(), versions.end());
  text_ += tok_->decode(ids);
  if (!reply.is_null()) messages_.push_back(std::move(reply));
  ++turns_;
}

void session::append_environment(const std::vector<llm::token_id>& ids) {
  tokens_.ids.insert(tokens_.ids.end(), ids.begin(), ids.end());
  tokens_.origins.insert(tokens_.origins.end(), ids.size(), token_origin::environment);
  tokens_.logprobs.insert(tokens_.logprobs.end(), ids.size(), 0.0f);
  tokens_.versions.insert(tokens_.versions.end(), ids.size(), 0);
}

}  // namespace milesrt::agent
