#include "actors/lib/agent/turn.hpp"

#include <algorithm>

#include "actors/lib/agent/openai_api.hpp"
#include "actors/lib/llm/tokenizer/tokenizer.hpp"

namespace milesrt::agent {
namespace {

/// The ids before `n`.
std::vector<llm::token_id> head(const std::vector<llm::token_id>& ids, size_t n) {
  return {ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n)};
}

}  // namespace

size_t tokens_before_stop(const llm::tokenizer& tok, const std::vector<llm::token_id>& ids,
                          const std::vector<std::string>& stop) {
  if (stop.empty() || ids.empty()) return ids.size();
  const std::string text = reply_text(tok, ids);
  size_t at = std::string::npos;
  for (const auto& s : stop)
    if (!s.empty()) at = std::min(at, text.find(s));
  if (at == std::string::npos) return ids.size();
  const std::string_view before = std::string_view(text).substr(0, at);
  // The most tokens whose text is a beginning of `before` (a token that holds the stop string's
  // first character, or is cut by it, is not one of them). A token's text only extends the text
  // before it, so the test is monotone but for a character split across tokens, whose first
  // part reads as U+FFFD: the search may then keep a token fewer, never one too many.
  size_t lo = 0, hi = ids.size();
  while (lo < hi) {
    const size_t mid = (lo + hi + 1) / 2;
    const std::string t = tok.decode(head(ids, mid));
    if (t.size() <= before.size() && before.compare(0, t.size(), t) == 0)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

recorded_turn record_chat_turn(session& s, const sampled_turn& turn,
                               const std::vector<std::string>& stop, tool_call_format format,
                               const std::string& call_id_prefix) {
  recorded_turn out;
  out.kept = tokens_before_stop(*s.tokenizer(), turn.ids, stop);
  const bool cut = out.kept < turn.ids.size();
  const auto kept = head(turn.ids, out.kept);
  // Ended by the model: the engine stopped at one of its end-of-turn tokens (special tokens; a
  // stop string the engine found where this reading does not is an open turn).
  out.closed = !cut && turn.finish_reason == "stop" && !kept.empty() &&
               s.tokenizer()->is_special(kept.back());
  out.reply = parse_reply(reply_text(*s.tokenizer(), kept), format, call_id_prefix);
  out.finish = finish_reason(out.reply, !cut && turn.finish_reason == "length");
  const auto n = static_cast<std::ptrdiff_t>(out.kept);
  s.append_sampled(kept, std::vector<float>(turn.logprobs.begin(), turn.logprobs.begin() + n),
                   std::vector<uint64_t>(turn.versions.begin(), turn.versions.begin() + n),
                   assistant_message(out.reply));
  if (!out.closed) s.close_open_turn();
  return out;
}

}  // namespace milesrt::agent
