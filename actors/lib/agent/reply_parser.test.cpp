// Replies taken apart: reasoning, content, and tool calls in the Hermes/Qwen3 and Llama 3.1 forms;
// malformed calls stay text and are counted.
#include "actors/lib/agent/reply_parser.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace milesrt::agent {
namespace {

using ojson = nlohmann::ordered_json;

std::string read_template(const std::string& name) {
  std::ifstream in(std::string(MILESRT_SOURCE_DIR) + "/test/chat_templates/" + name + ".jinja");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ReplyParser, ReadsTheFormFromRealTemplates) {
  for (const char* name : {"Qwen-Qwen3-0.6B", "Qwen-Qwen2.5-7B-Instruct", "Qwen-QwQ-32B",
                           "NousResearch-Hermes-3-Llama-3.1-8B-tool_use"}) {
    auto source = read_template(name);
    ASSERT_FALSE(source.empty()) << name;
    EXPECT_EQ(detect_tool_call_format(source), tool_call_format::hermes) << name;
  }
  for (const char* name : {"meta-llama-Llama-3.1-8B-Instruct", "meta-llama-Llama-3.2-3B-Instruct",
                           "meta-llama-Llama-3.3-70B-Instruct"})
    EXPECT_EQ(detect_tool_call_format(read_template(name)), tool_call_format::llama3_json) << name;
  for (const char* name : {"google-gemma-2-2b-it", "meta-llama-Meta-Llama-3-8B-Instruct"})
    EXPECT_EQ(detect_tool_call_format(read_template(name)), tool_call_format::none) << name;
}

TEST(ReplyParser, ReadsHermesCallsReasoningAndContent) {
  auto r = parse_reply(
      "<think>\nadd them\n</think>\n\nLet me compute.\n<tool_call>\n{\"name\": \"calc\", "
      "\"arguments\": {\"expr\": \"2+2\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"clock\", "
      "\"arguments\": \"{}\"}\n</tool_call>",
      tool_call_format::hermes, "call_3_");
  EXPECT_EQ(r.malformed, 0u);
  EXPECT_EQ(r.reasoning, "add them");
  EXPECT_EQ(r.content, "Let me compute.");
  EXPECT_EQ(r.tool_calls, ojson::parse(R"([
    {"id": "call_3_0", "type": "function", "function": {"name": "calc", "arguments": "{\"expr\":\"2+2\"}"}},
    {"id": "call_3_1", "type": "function", "function": {"name": "clock", "arguments": "{}"}}])"));
  EXPECT_EQ(assistant_message(r),
            ojson::parse(R"({"role": "assistant", "content": "Let me compute.",
    "tool_calls": [
      {"id": "call_3_0", "type": "function", "function": {"name": "calc", "arguments": "{\"expr\":\"2+2\"}"}},
      {"id": "call_3_1", "type": "function", "function": {"name": "clock", "arguments": "{}"}}],
    "reasoning_content": "add them"})"));
  auto only = parse_reply("<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>",
                          tool_call_format::hermes, "c");
  EXPECT_EQ(assistant_message(only)["content"], nullptr);
  auto plain = parse_reply("  just text \n", tool_call_format::hermes, "c");
  EXPECT_EQ(assistant_message(plain),
            ojson::parse(R"({"role": "assistant", "content": "just text"})"));
}

TEST(ReplyParser, AMalformedCallStaysTextAndIsCounted) {
  for (const char* text :
       {"<tool_call>\n{\"name\": \"calc\", \"arguments\": {\"expr\": }\n</tool_call>",
        "<tool_call>{\"arguments\": {}}</tool_call>",
        "<tool_call>{\"name\": 3, \"arguments\": {}}</tool_call>",
        "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>",
        "<tool_call>{\"name\": \"f\", \"arguments\": \"{bad\"}</tool_call>",
        "ok <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call> <tool_call>{\"name\": "
        "\"f\"",
        "<tool_call>[]</tool_call>"}) {
    auto r = parse_reply(text, tool_call_format::hermes, "c");
    EXPECT_EQ(r.malformed, 1u) << text;
    EXPECT_TRUE(r.tool_calls.empty()) << text;
    EXPECT_EQ(r.content, text) << text;
  }
  auto two = parse_reply("<tool_call>x</tool_call><tool_call>y</tool_call>",
                         tool_call_format::hermes, "c");
  EXPECT_EQ(two.malformed, 2u);
  // The same text under a template without tool calls is text, and nothing is counted.
  auto none = parse_reply("<tool_call>x</tool_call>", tool_call_format::none, "c");
  EXPECT_EQ(none.malformed, 0u);
  EXPECT_EQ(none.content, "<tool_call>x</tool_call>");
}

TEST(ReplyParser, ReadsLlama3JsonCalls) {
  auto r = parse_reply("{\"name\": \"calc\", \"parameters\": {\"expr\": \"2+2\"}}",
                       tool_call_format::llama3_json, "call_0_");
  EXPECT_EQ(r.malformed, 0u);
  EXPECT_EQ(r.content, "");
  EXPECT_EQ(r.tool_calls, ojson::parse(R"([{"id": "call_0_0", "type": "function",
    "function": {"name": "calc", "arguments": "{\"expr\":\"2+2\"}"}}])"));
  r = parse_reply("<|python_tag|>{\"name\": \"f\", \"arguments\": {\"a\": [1]}}",
                  tool_call_format::llama3_json, "c");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0]["function"]["arguments"], "{\"a\":[1]}");
  r = parse_reply("The answer is {4}.", tool_call_format::llama3_json, "c");
  EXPECT_EQ(r.content, "The answer is {4}.");
  EXPECT_EQ(r.malformed, 0u);
  for (const char* bad : {"{\"name\": \"f\", \"parameters\":", "{\"parameters\": {}}", "{oops}"}) {
    r = parse_reply(bad, tool_call_format::llama3_json, "c");
    EXPECT_EQ(r.malformed, 1u) << bad;
    EXPECT_EQ(r.content, bad);
    EXPECT_TRUE(r.tool_calls.empty());
  }
}

TEST(ReplyParser, SplitsReasoning) {
  auto r = parse_reply("<think>a\nb</think>\n\nanswer", tool_call_format::none, "c");
  EXPECT_EQ(r.reasoning, "a\nb");
  EXPECT_EQ(r.content, "answer");
  r = parse_reply("opened by the prompt</think>answer", tool_call_format::none, "c");
  EXPECT_EQ(r.reasoning, "opened by the prompt");
  EXPECT_EQ(r.content, "answer");
  r = parse_reply("answer with </think> inside <think>", tool_call_format::none, "c");
  EXPECT_EQ(r.reasoning, "");
  EXPECT_EQ(r.content, "answer with </think> inside <think>");
  r = parse_reply("no reasoning", tool_call_format::none, "c");
  EXPECT_EQ(r.reasoning, "");
}

}  // namespace
}  // namespace milesrt::agent
