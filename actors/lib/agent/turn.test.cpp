// Exact session tokens for every way a turn ends, under the real Qwen3 and Llama 3.1 chat
// templates (the tokenizer oracle's folders: each real template over a synthetic BPE with its
// family's special tokens). The oracle is the template's own rendering R of the conversation as
// the client sends it back (the reply it was given, then the next message): the stored sequence
// must be, token for token, the tokens of R up to the reply (the first turn's prompt), the
// sampled tokens the turn kept, and the tokens of R from the template's end-of-turn marker on.
// Where the model wrote the reply exactly as the template renders it, that is the tokens of R
// whole; where it did not (a trailing newline the template trims), only the sampled part differs.
#include "actors/lib/agent/turn.hpp"

#include <gtest/gtest.h>

#include "actors/lib/agent/conversation.hpp"
#include "actors/lib/llm/tokenizer/tokenizer.hpp"

namespace milesrt::agent {
namespace {

using ojson = nlohmann::ordered_json;
using ids_t = std::vector<llm::token_id>;

struct family {
  const char* folder;
  const char* eot;  ///< the template's end-of-turn marker after an assistant message
  tool_call_format format;
  const char* call;  ///< a tool call as the template renders it
};

const family kQwen3{"Qwen-Qwen3-0.6B", "<|im_end|>", tool_call_format::hermes,
                    "<tool_call>\n{\"name\": \"calc\", \"arguments\": {\"expr\": \"2+2\"}}\n"
                    "</tool_call>"};
const family kLlama31{"meta-llama-Llama-3.1-8B-Instruct", "<|eot_id|>",
                      tool_call_format::llama3_json,
                      "{\"name\": \"calc\", \"parameters\": {\"expr\": \"2+2\"}}"};

struct model {
  std::shared_ptr<const llm::tokenizer> tok;
  std::shared_ptr<const llm::chat_template> tmpl;
};

model load(const family& f) {
  auto t = llm::tokenizer::load(std::string(MILESRT_CHAT_TEMPLATE_DATA) + "/" + f.folder);
  if (!t.tok) throw std::runtime_error(t.error);
  auto c = llm::chat_template::from_model(*t.tok);
  if (!c.tmpl) throw std::runtime_error(c.error);
  return {t.tok, c.tmpl};
}

ojson tools() {
  return ojson::parse(R"([{"type": "function", "function": {"name": "calc",
    "description": "evaluates", "parameters": {"type": "object",
    "properties": {"expr": {"type": "string"}}}}}])");
}

/// One turn that ends as `ending` says, then the client's next request; checks the stored
/// sequence against the oracle token for token and returns the turn.
struct turn_case {
  std::string sampled;  ///< the text the model wrote (its tokens are this text's)
  bool eos = false;     ///< the model ended the turn with its end-of-turn token
  std::string finish = "stop";
  std::vector<std::string> stop;
  std::string expect_content;  ///< the reply's content the client gets
  bool tool_call = false;      ///< the next message is the tool's answer
};

recorded_turn run(const family& f, const turn_case& c) {
  const auto m = load(f);
  session s(m.tok, m.tmpl);
  llm::chat_options o;
  o.tools = tools();
  ojson messages = ojson::array({{{"role", "user"}, {"content", "What is 2+2?"}}});
  auto r = s.extend(messages, o);
  EXPECT_FALSE(r.error) << r.error->message;
  const ids_t prompt = s.tokens().ids;

  ids_t out = m.tok->encode(c.sampled, false);
  if (c.eos) out.push_back(m.tok->token_to_id(f.eot));
  std::vector<float> lp(out.size());
  for (size_t i = 0; i < out.size(); ++i) lp[i] = -0.5f - static_cast<float>(i);
  const auto turn = record_chat_turn(s, {out, lp, std::vector<uint64_t>(out.size(), 7), c.finish},
                                     c.stop, f.format, "call_0_");
  EXPECT_EQ(turn.reply.content, c.expect_content);
  EXPECT_EQ(turn.closed, c.eos && turn.kept == out.size());

  // The client sends the reply back (as an OpenAI client: the message it was given), then the
  // next message.
  messages.push_back(s.messages().back());
  if (c.tool_call) {
    EXPECT_EQ(turn.reply.tool_calls.size(), 1u);
    messages.push_back({{"role", "tool"}, {"tool_call_id", "call_0_0"}, {"content", "4"}});
  } else {
    messages.push_back({{"role", "user"}, {"content", "And 3+3?"}});
  }
  r = s.extend(messages, o);
  EXPECT_FALSE(r.error) << r.error->message;

  // The oracle.
  auto rendered = m.tmpl->render(template_messages(messages), [&] {
    llm::chat_options g = o;
    g.add_generation_prompt = true;
    return g;
  }());
  EXPECT_EQ(rendered.error, "");
  const std::string& R = rendered.text;
  const std::string prompt_text = m.tok->decode(prompt);
  EXPECT_EQ(R.compare(0, prompt_text.size(), prompt_text), 0) << R;
  const size_t eot_at = R.find(f.eot, prompt_text.size());
  EXPECT_NE(eot_at, std::string::npos);
  ids_t kept(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(turn.kept));
  if (turn.closed) kept.pop_back();  // the sampled end-of-turn is the oracle's tail's first token
  ids_t expected = prompt;
  expected.insert(expected.end(), kept.begin(), kept.end());
  const auto tail = m.tok->encode(std::string_view(R).substr(eot_at), false);
  expected.insert(expected.end(), tail.begin(), tail.end());
  EXPECT_EQ(s.tokens().ids, expected) << "stored:\n"
                                      << m.tok->decode(s.tokens().ids) << "\noracle:\n"
                                      << R;
  // Sampled tokens are the kept ones, in place, with their log-probs and versions.
  for (size_t i = 0; i < s.tokens().size(); ++i) {
    const bool sampled = i >= prompt.size() && i < prompt.size() + turn.kept;
    EXPECT_EQ(s.tokens().origins[i] == token_origin::sampled, sampled) << "token " << i;
    if (sampled) {
      EXPECT_EQ(s.tokens().logprobs[i], lp[i - prompt.size()]);
    }
  }
  return turn;
}

class TurnEnding : public ::testing::TestWithParam<family> {};

TEST_P(TurnEnding, EndOfTurnTokenKeepsEverySampledToken) {
  auto t = run(GetParam(), {"It is 4.", true, "stop", {}, "It is 4."});
  EXPECT_TRUE(t.closed);
  EXPECT_EQ(t.finish, "stop");
}

TEST_P(TurnEnding, MaxTokensAfterANewlineGetsTheTemplatesEndOfTurn) {
  // The template renders the trimmed content and then its end-of-turn; the session keeps the
  // sampled newline and then closes the turn as the template does.
  auto t = run(GetParam(), {"It is 4.\n", false, "length", {}, "It is 4."});
  EXPECT_FALSE(t.closed);
  EXPECT_EQ(t.finish, "length");
}

TEST_P(TurnEnding, MaxTokensMidSentence) {
  run(GetParam(), {"It is", false, "length", {}, "It is"});
}

TEST_P(TurnEnding, AStopStringDropsTheTokenItBeginsInAndWhatFollows) {
  // The stop string begins at the second character of the reply's last token: that token goes,
  // and the reply is the text of the tokens before it.
  const auto m = load(GetParam());
  const std::string sampled = "It is 4. The";  // " The" is one token of these tokenizers
  const auto ids = m.tok->encode(sampled, false);
  const std::string last = m.tok->decode({ids.back()});
  ASSERT_GE(last.size(), 2u) << "the last token is one character: pick another reply";
  const std::string before = m.tok->decode(ids_t(ids.begin(), ids.end() - 1));
  auto t = run(GetParam(), {sampled,
                            false,
                            "stop",
                            {last.substr(1)},
                            before.substr(0, before.find_last_not_of(' ') + 1)});
  EXPECT_EQ(t.kept, ids.size() - 1);
  EXPECT_EQ(t.finish, "stop");
  EXPECT_FALSE(t.closed);
}

TEST_P(TurnEnding, AStopStringAtATokensStartKeepsTheTokensBeforeIt) {
  auto t = run(GetParam(), {"It is 4. Done", false, "stop", {"Do"}, "It is 4."});
  EXPECT_FALSE(t.closed);
}

TEST_P(TurnEnding, AStopStringInsideASpecialTokensText) {
  // The model wrote a special token mid-reply; the stop string is part of its text.
  const family f = GetParam();
  const std::string special =
      f.format == tool_call_format::hermes ? "<|endoftext|>" : "<|begin_of_text|>";
  ASSERT_TRUE(load(f).tok->is_special(load(f).tok->token_to_id(special)));
  auto t = run(f, {"It is 4." + special + " more", false, "stop", {"of"}, "It is 4."});
  EXPECT_FALSE(t.closed);
}

TEST_P(TurnEnding, AStopStringThatCoversTheWholeReply) {
  auto t = run(GetParam(), {"Done.", false, "stop", {"Do"}, ""});
  EXPECT_EQ(t.kept, 0u);
}

TEST_P(TurnEnding, AToolCallWrittenAsTheTemplateWritesIt) {
  const family f = GetParam();
  auto t = run(f, {f.call, true, "stop", {}, "", true});
  EXPECT_EQ(t.finish, "tool_calls");
}

INSTANTIATE_TEST_SUITE_P(RealTemplates, TurnEnding, ::testing::Values(kQwen3, kLlama31),
                         [](const auto& info) {
                           return std::string(
                               info.param.format == tool_call_format::hermes ? "Qwen3" : "Llama31");
                         });

TEST(TurnEnding, TheEndOfTurnTokenIsLearnedFromTheTemplate) {
  for (const auto& f : {kQwen3, kLlama31}) {
    const auto m = load(f);
    EXPECT_EQ(end_of_turn_token(*m.tok, *m.tmpl), m.tok->token_to_id(f.eot)) << f.folder;
  }
}

TEST(TurnEnding, TokensBeforeStopKeepWholeTokensOnly) {
  const auto m = load(kQwen3);
  const auto ids = m.tok->encode("alpha beta gamma", false);
  EXPECT_EQ(tokens_before_stop(*m.tok, ids, {}), ids.size());
  EXPECT_EQ(tokens_before_stop(*m.tok, ids, {"zeta"}), ids.size());
  EXPECT_EQ(tokens_before_stop(*m.tok, ids, {"alpha"}), 0u);
  // A stop string that begins inside each token in turn keeps the tokens before that one.
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string piece = m.tok->decode({ids[i]});
    if (piece.size() < 2) continue;
    const std::string rest = m.tok->decode(ids_t(ids.begin() + std::ptrdiff_t(i) + 1, ids.end()));
    EXPECT_EQ(tokens_before_stop(*m.tok, ids, {piece.substr(1) + rest}), i)
        << "token " << i << " '" << piece << "'";
  }
  EXPECT_EQ(tokens_before_stop(*m.tok, ids, {"alpha\x01"}), ids.size());
}

TEST(TurnEnding, AFailedTurnIsTakenBackWhole) {
  const auto m = load(kQwen3);
  session s(m.tok, m.tmpl);
  ojson messages = ojson::array({{{"role", "user"}, {"content", "Hi"}}});
  ASSERT_FALSE(s.extend(messages, {}).error);
  record_chat_turn(s, {m.tok->encode("Hello.", false), {-1, -1}, {1, 1}, "length"}, {},
                   tool_call_format::hermes, "c");
  const auto before = s.tokens();
  const auto mark = s.mark();
  messages.push_back(s.messages().back());
  messages.push_back({{"role", "user"}, {"content", "Again"}});
  ASSERT_FALSE(s.extend(messages, {}).error);
  ASSERT_GT(s.tokens().size(), before.size());
  s.undo(mark);
  EXPECT_EQ(s.tokens().ids, before.ids);
  EXPECT_EQ(s.messages().size(), 2u);
  EXPECT_EQ(s.turns(), 1u);
  // The same request goes through again, to the same tokens.
  ASSERT_FALSE(s.extend(messages, {}).error);
  EXPECT_EQ(m.tok->decode(s.tokens().ids), s.text());
}

TEST(TurnEnding, IdsPastTheVocabularyNeverEnterASession) {
  const auto m = load(kQwen3);
  session s(m.tok, nullptr, 0, 1000);
  auto r = s.extend_ids({1, 2, 999});
  ASSERT_FALSE(r.error);
  r = s.extend_ids({1, 2, 999, 1000});
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->what, session_error::kind::bad_request);
  EXPECT_NE(r.error->message.find("input_ids[3]"), std::string::npos) << r.error->message;
  EXPECT_EQ(s.tokens().size(), 3u);
}

}  // namespace
}  // namespace milesrt::agent
