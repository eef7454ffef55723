// A session's tokens over real chat templates (the tokenizer oracle's model folders: each real
// template over a synthetic BPE with its family's special tokens): multi-turn tool use under
// Qwen3 (which rewrites history), a greedy conversation under a template that does not (the
// session's text is then the whole conversation's rendering), Llama 3.1's JSON tool calls,
// requests that do not extend the session, and sessions driven by ids.
#include "actors/lib/agent/session.hpp"

#include <gtest/gtest.h>

#include "actors/lib/agent/conversation.hpp"
#include "actors/lib/agent/reply_parser.hpp"
#include "actors/lib/llm/tokenizer/tokenizer.hpp"

namespace milesrt::agent {
namespace {

using ojson = nlohmann::ordered_json;

struct model {
  std::shared_ptr<const llm::tokenizer> tok;
  std::shared_ptr<const llm::chat_template> tmpl;
};

model load(const std::string& name) {
  auto t = llm::tokenizer::load(std::string(MILESRT_CHAT_TEMPLATE_DATA) + "/" + name);
  if (!t.tok) throw std::runtime_error(t.error);
  auto c = llm::chat_template::from_model(*t.tok);
  if (!c.tmpl) throw std::runtime_error(c.error);
  return {t.tok, c.tmpl};
}

/// What a client would do with a turn the model sampled: the reply message it gets.
ojson sample(session& s, const model& m, const std::string& text, uint64_t version,
             tool_call_format format) {
  auto ids = m.tok->encode(text, false);
  std::vector<float> logprobs(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) logprobs[i] = -0.25f * static_cast<float>(i + 1);
  auto reply = assistant_message(
      parse_reply(reply_text(*m.tok, ids), format, "call_" + std::to_string(s.turns()) + "_"));
  s.append_sampled(ids, logprobs, version, reply);
  return reply;
}

/// The text of the session's tokens from `from` on.
std::string text_from(const session& s, const model& m, size_t from) {
  std::vector<llm::token_id> ids(s.tokens().ids.begin() + static_cast<std::ptrdiff_t>(from),
                                 s.tokens().ids.end());
  return m.tok->decode(ids);
}

TEST(AgentSession, KeepsSampledTokensExactThroughQwen3ToolTurns) {
  const auto m = load("Qwen-Qwen3-0.6B");
  session s(m.tok, m.tmpl);
  ojson messages = ojson::parse(R"([{"role": "system", "content": "Be brief."},
                                    {"role": "user", "content": "What is 2+2?"}])");
  auto r = s.extend(messages, {});
  ASSERT_FALSE(r.error) << r.error->message;
  const std::string first =
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is "
      "2+2?<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(s.text(), first);
  EXPECT_EQ(s.tokens().ids, m.tok->encode(first, false));
  EXPECT_EQ(r.appended, s.tokens().size());

  // Turn 1: reasoning and a tool call, answered by the tool.
  const std::string call =
      "<think>\nI should use the tool.\n</think>\n\n<tool_call>\n{\"name\": \"calc\", "
      "\"arguments\": {\"expr\": \"2+2\"}}\n</tool_call><|im_end|>";
  auto reply = sample(s, m, call, 3, tool_call_format::hermes);
  ASSERT_EQ(reply["tool_calls"].size(), 1u);
  EXPECT_EQ(reply["tool_calls"][0]["function"]["arguments"], "{\"expr\":\"2+2\"}");
  EXPECT_EQ(reply["reasoning_content"], "I should use the tool.");
  const auto after_turn1 = s.tokens();
  // The client sends it back as OpenAI clients do: without the reasoning, arguments a string.
  ojson back = {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", reply["tool_calls"]}};
  messages.push_back(back);
  messages.push_back({{"role", "tool"}, {"tool_call_id", "call_0_0"}, {"content", "4"}});
  r = s.extend(messages, {});
  ASSERT_FALSE(r.error) << r.error->message;
  EXPECT_EQ(text_from(s, m, after_turn1.size()),
            "\n<|im_start|>user\n<tool_response>\n4\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(r.appended, s.tokens().size() - after_turn1.size());

  // Turn 2: the answer; then a new user query, after which Qwen3 drops turn 1's reasoning.
  sample(s, m, "<think>\nThe tool said 4.\n</think>\n\nIt is 4.<|im_end|>", 4,
         tool_call_format::hermes);
  messages.push_back({{"role", "assistant"}, {"content", "It is 4."}});
  messages.push_back({{"role", "user"}, {"content", "And 3+3?"}});
  const size_t before = s.tokens().size();
  r = s.extend(messages, {});
  ASSERT_FALSE(r.error) << r.error->message;
  EXPECT_EQ(text_from(s, m, before),
            "\n<|im_start|>user\nAnd 3+3?<|im_end|>\n<|im_start|>assistant\n");

  // What was stored never changed: the first turn's tokens are a prefix, sampled ones marked
  // with their log-probs and versions; the sequence is the prompt deltas plus the sampled ids.
  const auto& t = s.tokens();
  ASSERT_GE(t.size(), after_turn1.size());
  EXPECT_TRUE(std::equal(after_turn1.ids.begin(), after_turn1.ids.end(), t.ids.begin()));
  const auto call_ids = m.tok->encode(call, false);
  const size_t sampled_at = m.tok->encode(first, false).size();
  for (size_t i = 0; i < call_ids.size(); ++i) {
    EXPECT_EQ(t.ids[sampled_at + i], call_ids[i]);
    EXPECT_EQ(t.origins[sampled_at + i], token_origin::sampled);
    EXPECT_EQ(t.versions[sampled_at + i], 3u);
    EXPECT_FLOAT_EQ(t.logprobs[sampled_at + i], -0.25f * static_cast<float>(i + 1));
  }
  size_t sampled = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    sampled += t.origins[i] == token_origin::sampled;
    if (t.origins[i] == token_origin::environment) {
      EXPECT_EQ(t.logprobs[i], 0.0f);
      EXPECT_EQ(t.versions[i], 0u);
    }
  }
  EXPECT_EQ(sampled,
            call_ids.size() +
                m.tok->encode("<think>\nThe tool said 4.\n</think>\n\nIt is 4.<|im_end|>").size());
  EXPECT_EQ(s.turns(), 2u);
  EXPECT_EQ(m.tok->decode(t.ids), s.text());
}

TEST(AgentSession, AGreedyConversationIsTheWholeRenderingUnderAnAppendOnlyTemplate) {
  // Four turns with tool calls under Qwen2.5's template, which never rewrites history: the
  // session's text is the rendering of the whole conversation, and its ids are the rendered
  // deltas' ids and the sampled ids, in order.
  const auto m = load("Qwen-Qwen2.5-7B-Instruct");
  session s(m.tok, m.tmpl);
  llm::chat_options o;
  o.tools =
      ojson::parse(R"([{"type": "function", "function": {"name": "calc", "description": "adds",
    "parameters": {"type": "object", "properties": {"expr": {"type": "string"}}}}}])");
  ojson messages = ojson::array();
  std::vector<llm::token_id> expected;
  auto extend = [&] {
    const std::string before = s.text();
    auto r = s.extend(messages, o);
    ASSERT_FALSE(r.error) << r.error->message;
    auto delta = m.tok->encode(s.text().substr(before.size()), false);
    expected.insert(expected.end(), delta.begin(), delta.end());
  };
  auto model_writes = [&](const std::string& text) {
    const auto before = s.tokens().size();
    messages.push_back(sample(s, m, text, 9, tool_call_format::hermes));
    expected.insert(expected.end(), s.tokens().ids.begin() + static_cast<std::ptrdiff_t>(before),
                    s.tokens().ids.end());
  };
  const char* calls[] = {"2+2", "3+3"};
  const char* results[] = {"4", "6"};
  for (int turn = 0; turn < 2; ++turn) {
    messages.push_back(
        {{"role", "user"}, {"content", std::string("What is ") + calls[turn] + "?"}});
    extend();
    model_writes(std::string("<tool_call>\n{\"name\": \"calc\", \"arguments\": {\"expr\": \"") +
                 calls[turn] + "\"}}\n</tool_call><|im_end|>");
    ASSERT_EQ(messages.back()["tool_calls"].size(), 1u);
    messages.push_back({{"role", "tool"},
                        {"tool_call_id", messages.back()["tool_calls"][0]["id"]},
                        {"content", results[turn]}});
    extend();
    model_writes(std::string("It is ") + results[turn] + ".<|im_end|>");
  }
  EXPECT_EQ(s.turns(), 4u);
  auto whole = m.tmpl->render(template_messages(messages), o);
  ASSERT_EQ(whole.error, "");
  // The template ends each turn with "<|im_end|>\n"; the model stopped at "<|im_end|>".
  EXPECT_EQ(s.text() + "\n", whole.text);
  EXPECT_EQ(m.tok->decode(s.tokens().ids) + "\n", whole.text);
  EXPECT_EQ(s.tokens().ids, expected);
}

TEST(AgentSession, ReadsLlama31JsonCallsAndItsToolRole) {
  const auto m = load("meta-llama-Llama-3.1-8B-Instruct");
  session s(m.tok, m.tmpl);
  ojson messages = ojson::parse(R"([{"role": "user", "content": "2+2?"}])");
  ASSERT_FALSE(s.extend(messages, {}).error);
  auto reply = sample(s, m, "{\"name\": \"calc\", \"parameters\": {\"expr\": \"2+2\"}}<|eot_id|>",
                      7, detect_tool_call_format(m.tmpl->source()));
  ASSERT_EQ(reply["tool_calls"].size(), 1u);
  EXPECT_EQ(reply["tool_calls"][0]["function"]["name"], "calc");
  messages.push_back(reply);
  messages.push_back({{"role", "tool"}, {"content", "4"}});
  const size_t before = s.tokens().size();
  auto r = s.extend(messages, {});
  ASSERT_FALSE(r.error) << r.error->message;
  EXPECT_EQ(text_from(s, m, before),
            "<|start_header_id|>ipython<|end_header_id|>\n\n\"4\"<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(AgentSession, ARequestThatDoesNotExtendTheSessionChangesNothing) {
  const auto m = load("Qwen-Qwen3-0.6B");
  session s(m.tok, m.tmpl);
  ojson messages = ojson::parse(R"([{"role": "user", "content": "a"}])");
  ASSERT_FALSE(s.extend(messages, {}).error);
  sample(s, m, "b<|im_end|>", 1, tool_call_format::hermes);
  const auto tokens = s.tokens();
  const auto text = s.text();
  auto edited =
      ojson::parse(R"([{"role": "user", "content": "A"}, {"role": "assistant", "content": "b"},
                                 {"role": "user", "content": "c"}])");
  auto r = s.extend(edited, {});
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->what, session_error::kind::not_an_extension);
  EXPECT_EQ(r.error->index, 0u);
  EXPECT_EQ(r.error->message,
            "messages[0] differs from the session's message 0 (a request must extend the "
            "conversation so far)");
  r = s.extend(ojson::parse(R"([{"role": "user", "content": "a"}])"), {});
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->index, 1u);
  EXPECT_EQ(r.error->message, "the request has 1 messages, fewer than the session's 2");
  r = s.extend(ojson::parse(R"([{"role": "user", "content": 5}])"), {});
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->what, session_error::kind::bad_request);
  EXPECT_EQ(r.error->message, "messages[0].content: expected a string, null or a list of parts");
  r = s.extend_ids({1, 2});
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->what, session_error::kind::wrong_mode);
  EXPECT_EQ(s.tokens().ids, tokens.ids);
  EXPECT_EQ(s.text(), text);
  EXPECT_EQ(s.messages().size(), 2u);
  EXPECT_THROW(s.append_sampled({1, 2}, {0.0f}, 1, ojson::object()), std::invalid_argument);
  EXPECT_THROW(s.append_sampled({1}, {0.0f}, 1, nullptr), std::invalid_argument);
}

TEST(AgentSession, IdsExtendIdsAndAreCheckedTokenByToken) {
  const auto m = load("Qwen-Qwen3-0.6B");
  session s(m.tok, nullptr);
  ASSERT_FALSE(s.extend_ids({10, 11, 12}).error);
  s.append_sampled({20, 21}, {-1.0f, -2.0f}, 5);
  auto r = s.extend_ids({10, 11, 12, 20, 21, 30});
  ASSERT_FALSE(r.error);
  EXPECT_EQ(r.appended, 1u);
  EXPECT_EQ(s.tokens().ids, (std::vector<llm::token_id>{10, 11, 12, 20, 21, 30}));
  EXPECT_EQ(s.tokens().origins,
            (std::vector<token_origin>{token_origin::environment, token_origin::environment,
                                       token_origin::environment, token_origin::sampled,
                                       token_origin::sampled, token_origin::environment}));
  r = s.extend_ids({10, 11, 12, 20, 22, 30, 40});
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->index, 4u);
  EXPECT_EQ(r.error->message, "input_ids[4] is 22, the session's is 21");
  r = s.extend_ids({10, -1});
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->message, "input_ids[1]: negative id");
  r = s.extend(ojson::parse(R"([{"role": "user", "content": "a"}])"), {});
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->what, session_error::kind::wrong_mode);
  EXPECT_EQ(s.tokens().size(), 6u);
}

TEST(AgentSession, AReplysTextKeepsItsSpecialTagsAndDropsItsEnd) {
  const auto m = load("Qwen-Qwen3-0.6B");  // <think> and <tool_call> are special here
  auto ids =
      m.tok->encode("<think>\nr\n</think>\n\n<tool_call>\n{}\n</tool_call><|im_end|>", false);
  EXPECT_EQ(reply_text(*m.tok, ids), "<think>\nr\n</think>\n\n<tool_call>\n{}\n</tool_call>");
  const auto end = m.tok->token_to_id("<|endoftext|>");
  ids.push_back(end);
  EXPECT_EQ(reply_text(*m.tok, ids, {end, m.tok->token_to_id("<|im_end|>")}),
            "<think>\nr\n</think>\n\n<tool_call>\n{}\n</tool_call>");
}

TEST(AgentSession, AnExtensionPastTheTokenLimitChangesNothing) {
  const auto m = load("Qwen-Qwen3-0.6B");
  const ojson first = ojson::parse(R"([{"role": "user", "content": "Hi"}])");
  const size_t prompt =
      m.tok->encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n").size();
  session s(m.tok, m.tmpl, prompt + 2);
  ASSERT_FALSE(s.extend(first, {}).error);
  sample(s, m, "Yo<|im_end|>", 1, tool_call_format::hermes);
  ojson next = first;
  next.push_back({{"role", "assistant"}, {"content", "Yo"}});
  next.push_back({{"role", "user"}, {"content", "More"}});
  const auto before = s.tokens().size();
  auto r = s.extend(next, {});
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->what, session_error::kind::too_long);
  EXPECT_NE(r.error->message.find("over its limit of " + std::to_string(prompt + 2)),
            std::string::npos)
      << r.error->message;
  EXPECT_EQ(s.tokens().size(), before);
  EXPECT_EQ(s.messages().size(), 2u);
  session ids(m.tok, nullptr, 3);
  ASSERT_FALSE(ids.extend_ids({1, 2, 3}).error);
  r = ids.extend_ids({1, 2, 3, 4});
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->message, "the session would hold 4 tokens, over its limit of 3");
}

TEST(AgentSession, FindsTheSessionTextInARewrittenRendering) {
  // Appended: the rest.
  EXPECT_EQ(session_text_end("<a>x", "<a>x<b>", 0, 7), 4u);
  EXPECT_EQ(session_text_end("", "<a>", 0, 3), 0u);
  // Rewritten (reasoning dropped): the end of the reply, found from its end.
  const std::string t = "<u>q</u><a><think>r</think>yes</a>";
  const std::string r = "<u>q</u><a>yes</a><u>q2</u><a>";
  EXPECT_EQ(session_text_end(t, r, 0, r.find("q2")), r.find("<u>q2"));
  // The same reply twice, both rewritten: unbounded, the first would be taken; the last message
  // began after it.
  const std::string t2 = "<u>q</u><a><think>r</think>ok</a><u>q</u><a><think>s</think>ok</a>";
  const std::string r2 = "<u>q</u><a>ok</a><u>q</u><a>ok</a><u>n</u><a>";
  EXPECT_EQ(session_text_end(t2, r2, 0, r2.find("n</u>")), r2.find("</a>") + 4);
  EXPECT_EQ(session_text_end(t2, r2, r2.rfind("ok</a><u>n"), r2.find("n</u>")), r2.find("<u>n"));
  // An end-of-turn sampled otherwise than the template writes it shares only its last bytes,
  // as a header does: the first is the end.
  const std::string t3 = "<s>q<e><s>A<m>";
  const std::string r3 = "<s>q<e><s>A<e><h>tool<e>4";
  EXPECT_EQ(session_text_end(t3, r3, r3.find("A<e>"), r3.find("4")), r3.find("<h>"));
  // Nothing in common at the end: not found.
  EXPECT_EQ(session_text_end("<a>xyz", "<b>uvw<c>", 0, 9), std::nullopt);
}

TEST(AgentSession, KeepsALlama31PythonTagCallAndItsEndOfMessage) {
  // The model called through <|python_tag|> and ended with <|eom_id|>; the template writes the
  // call as bare JSON ending with <|eot_id|>. The sampled tokens stay; the tool's turn follows.
  const auto m = load("meta-llama-Llama-3.1-8B-Instruct");
  session s(m.tok, m.tmpl);
  ojson messages = ojson::parse(R"([{"role": "user", "content": "2+2?"}])");
  ASSERT_FALSE(s.extend(messages, {}).error);
  auto ids = m.tok->encode(
      "<|python_tag|>{\"name\": \"calc\", \"parameters\": {\"expr\": \"2+2\"}}<|eom_id|>", false);
  const std::vector<llm::token_id> stops = {m.tok->token_to_id("<|eot_id|>"),
                                            m.tok->token_to_id("<|eom_id|>")};
  auto reply = assistant_message(
      parse_reply(reply_text(*m.tok, ids, stops), tool_call_format::llama3_json, "c"));
  ASSERT_EQ(reply["tool_calls"].size(), 1u);
  s.append_sampled(ids, std::vector<float>(ids.size(), -0.5f), 2, reply);
  messages.push_back(reply);
  messages.push_back({{"role", "tool"}, {"content", "4"}});
  const size_t before = s.tokens().size();
  auto r = s.extend(messages, {});
  ASSERT_FALSE(r.error) << r.error->message;
  EXPECT_EQ(text_from(s, m, before),
            "<|start_header_id|>ipython<|end_header_id|>\n\n\"4\"<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(s.tokens().ids[before - 1], m.tok->token_to_id("<|eom_id|>"));
}

TEST(AgentSession, AnEmptyThinkingBlockOfThePromptStaysWhereItWas) {
  // With enable_thinking=false Qwen3's generation prompt writes an empty reasoning block, which
  // the template leaves out when it renders that turn later.
  const auto m = load("Qwen-Qwen3-0.6B");
  session s(m.tok, m.tmpl);
  llm::chat_options o;
  o.extra["enable_thinking"] = false;
  ojson messages = ojson::parse(R"([{"role": "user", "content": "Hi"}])");
  ASSERT_FALSE(s.extend(messages, o).error);
  EXPECT_EQ(s.text(),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  sample(s, m, "Hello.<|im_end|>", 1, tool_call_format::hermes);
  messages.push_back({{"role", "assistant"}, {"content", "Hello."}});
  messages.push_back({{"role", "user"}, {"content", "Bye"}});
  const size_t before = s.tokens().size();
  auto r = s.extend(messages, o);
  ASSERT_FALSE(r.error) << r.error->message;
  EXPECT_EQ(text_from(s, m, before),
            "\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

}  // namespace
}  // namespace milesrt::agent
