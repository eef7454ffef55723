#pragma once
/// How a sampled turn enters its session, whatever ended it (docs/sessions.md, "Exact tokens"):
///  - an end-of-turn token (EOS): every sampled token is kept, the turn is closed;
///  - `max_tokens`: every sampled token is kept, the turn is open;
///  - a stop string: the tokens before the one in which the stop string begins are kept (that
///    token and the rest were sampled but never shown: the reply the client gets is the kept
///    tokens' text, so the conversation and the tokens agree), the turn is open.
/// An open turn of a session of messages is then closed as the chat template closes an assistant
/// message: its end-of-turn token is appended as an environment token, so the next turn's
/// tokens follow the template's `<|im_end|>` / `<|eot_id|>` exactly, never the literal text of a
/// marker or nothing.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "actors/lib/agent/reply_parser.hpp"
#include "actors/lib/agent/session.hpp"

namespace milesrt::agent {

/// What the engine sampled for a turn.
struct sampled_turn {
  std::vector<llm::token_id> ids;
  std::vector<float> logprobs;
  std::vector<uint64_t> versions;
  std::string finish_reason;  ///< "stop" (an end-of-turn token or a stop string), "length", ...
};

/// How many of `ids` come before the token in which the first of `stop` begins in the reply's
/// text (all of them when none occurs): their text is the longest that ends before the stop.
size_t tokens_before_stop(const llm::tokenizer& tok, const std::vector<llm::token_id>& ids,
                          const std::vector<std::string>& stop);

/// A turn as the session recorded it.
struct recorded_turn {
  parsed_reply reply;
  std::string finish;   ///< the OpenAI finish_reason: "stop", "length" or "tool_calls"
  size_t kept = 0;      ///< sampled tokens kept in the session
  bool closed = false;  ///< the model ended its turn with an end-of-turn token
};

/// Records `turn` in `s` (a session of messages): the kept tokens as sampled, the reply message
/// read from their text, and, for an open turn, the template's end-of-turn token (see above).
recorded_turn record_chat_turn(session& s, const sampled_turn& turn,
                               const std::vector<std::string>& stop, tool_call_format format,
                               const std::string& call_id_prefix);

}  // namespace milesrt::agent
