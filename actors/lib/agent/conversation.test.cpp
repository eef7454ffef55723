// Messages: what is refused (naming the field), what counts as the same message when a client
// sends back what it was answered, and the form templates get.
#include "actors/lib/agent/conversation.hpp"

#include <gtest/gtest.h>

namespace milesrt::agent {
namespace {

using ojson = nlohmann::ordered_json;

TEST(Conversation, RefusesMalformedMessagesNamingTheField) {
  EXPECT_EQ(check_messages(ojson::parse(R"([{"role": "user", "content": "hi"}])")), "");
  EXPECT_EQ(check_messages(ojson::parse(R"({"role": "user"})")), "messages: expected a list");
  EXPECT_EQ(check_messages(ojson::parse(R"([1])")), "messages[0]: expected an object");
  EXPECT_EQ(check_messages(ojson::parse(R"([{"content": "x"}])")),
            "messages[0].role: expected a string");
  EXPECT_EQ(check_messages(ojson::parse(R"([{"role": "user"}, {"role": "user", "content": 3}])")),
            "messages[1].content: expected a string, null or a list of parts");
  EXPECT_EQ(check_messages(ojson::parse(R"([{"role": "user", "content": [{"type": "text"}]}])")),
            "messages[0].content[0].text: expected a string");
  EXPECT_EQ(check_messages(ojson::parse(R"([{"role": "user", "content": [7]}])")),
            "messages[0].content[0]: expected an object with a string type");
  EXPECT_EQ(
      check_messages(ojson::parse(R"([{"role": "assistant", "tool_calls": [{"function": {}}]}])")),
      "messages[0].tool_calls[0].function.name: expected a string");
  EXPECT_EQ(
      check_messages(ojson::parse(
          R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": 1}}]}])")),
      "messages[0].tool_calls[0].function.arguments: expected a string or an object");
  EXPECT_EQ(check_messages(ojson::parse(R"([{"role": "assistant", "tool_calls": {}}])")),
            "messages[0].tool_calls: expected a list");
  EXPECT_EQ(check_messages(ojson::parse(R"([{"role": "tool", "tool_call_id": 5}])")),
            "messages[0].tool_call_id: expected a string");
}

TEST(Conversation, AMessageSentBackReshapedIsTheSame) {
  auto same = [](const char* a, const char* b) {
    return same_message(ojson::parse(a), ojson::parse(b));
  };
  EXPECT_TRUE(same(R"({"role": "assistant", "content": null})", R"({"role": "assistant"})"));
  EXPECT_TRUE(same(R"({"role": "assistant", "content": ""})", R"({"role": "assistant"})"));
  EXPECT_TRUE(same(
      R"({"role": "user", "content": "ab"})",
      R"({"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]})"));
  EXPECT_TRUE(same(R"({"role": "assistant", "content": "x", "reasoning_content": "hmm"})",
                   R"({"role": "assistant", "content": "x"})"));
  const char* call =
      R"({"role": "assistant", "tool_calls": [{"id": "c0", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1, \"b\": [2]}"}}]})";
  EXPECT_TRUE(same(
      call,
      R"({"role": "assistant", "tool_calls": [{"id": "c0", "function": {"name": "f", "arguments": "{\"a\":1,\"b\":[2]}"}}]})"));
  EXPECT_TRUE(same(
      call,
      R"({"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1, "b": [2]}}}]})"));
  EXPECT_FALSE(same(
      call,
      R"({"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": {"a": 1, "b": [2]}}}]})"));
  EXPECT_FALSE(same(
      call,
      R"({"role": "assistant", "tool_calls": [{"function": {"name": "g", "arguments": {"a": 1, "b": [2]}}}]})"));
  EXPECT_FALSE(same(
      call,
      R"({"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 2, "b": [2]}}}]})"));
  EXPECT_FALSE(same(call, R"({"role": "assistant"})"));
  EXPECT_FALSE(
      same(R"({"role": "user", "content": "a"})", R"({"role": "system", "content": "a"})"));
  EXPECT_FALSE(same(R"({"role": "user", "content": "a"})", R"({"role": "user", "content": "a "})"));
  EXPECT_FALSE(same(R"({"role": "tool", "tool_call_id": "c0", "content": "4"})",
                    R"({"role": "tool", "tool_call_id": "c1", "content": "4"})"));
  EXPECT_FALSE(same(R"({"role": "tool", "name": "f", "content": "4"})",
                    R"({"role": "tool", "content": "4"})"));
}

TEST(Conversation, FindsTheFirstMessageNotRepeated) {
  auto stored =
      ojson::parse(R"([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])");
  auto longer = stored;
  longer.push_back({{"role", "user"}, {"content", "c"}});
  EXPECT_EQ(first_difference(stored, longer), std::nullopt);
  EXPECT_EQ(first_difference(stored, stored), std::nullopt);
  EXPECT_EQ(first_difference(ojson::array(), longer), std::nullopt);
  longer[1]["content"] = "B";
  EXPECT_EQ(first_difference(stored, longer), 1u);
  EXPECT_EQ(first_difference(stored, ojson::parse(R"([{"role": "user", "content": "a"}])")), 1u);
  EXPECT_EQ(first_difference(stored, ojson::array()), 0u);
}

TEST(Conversation, GivesTemplatesStringsAndArgumentObjects) {
  auto shaped = template_messages(ojson::parse(R"([
    {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    {"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "f", "arguments": "{\"x\": 1}"}},
                                                          {"function": {"name": "g", "arguments": "not json"}}]},
    {"role": "tool", "content": "4"}])"));
  EXPECT_EQ(shaped[0]["content"], "ab");
  EXPECT_EQ(shaped[1]["content"], "");
  EXPECT_EQ(shaped[1]["tool_calls"][0]["function"]["arguments"], ojson::parse(R"({"x": 1})"));
  EXPECT_EQ(shaped[1]["tool_calls"][1]["function"]["arguments"], "not json");
  EXPECT_EQ(shaped[2]["content"], "4");
}

}  // namespace
}  // namespace milesrt::agent
