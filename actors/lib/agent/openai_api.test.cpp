// The chat completions protocol: requests checked field by field, and the bodies of answers,
// chunks and errors as OpenAI's clients read them.
#include "actors/lib/agent/openai_api.hpp"

#include <gtest/gtest.h>

namespace milesrt::agent {
namespace {

using ojson = nlohmann::ordered_json;

TEST(OpenaiApi, ReadsAFullChatRequest) {
  auto r = parse_chat_request(R"({
    "model": "m", "messages": [{"role": "user", "content": "hi"}],
    "tools": [{"type": "function", "function": {"name": "calc", "parameters": {"type": "object"}}}],
    "tool_choice": "auto", "temperature": 0.5, "top_p": 0.9, "max_tokens": 64,
    "stop": ["\n\n", "END"], "n": 1, "stream": true, "stream_options": {"include_usage": true},
    "chat_template_kwargs": {"enable_thinking": false}, "seed": 3, "user": "x"})");
  ASSERT_EQ(r.error, "");
  const auto& q = r.request;
  EXPECT_EQ(q.model, "m");
  EXPECT_EQ(q.messages.size(), 1u);
  EXPECT_EQ(q.tools.size(), 1u);
  EXPECT_EQ(q.tool_choice, "auto");
  EXPECT_EQ(q.sampling.temperature, 0.5);
  EXPECT_EQ(q.sampling.top_p, 0.9);
  EXPECT_EQ(q.sampling.max_tokens, 64u);
  EXPECT_EQ(q.sampling.stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_TRUE(q.stream);
  EXPECT_TRUE(q.include_usage);
  EXPECT_EQ(q.template_kwargs, (ojson{{"enable_thinking", false}}));
  // The defaults, and nulls as absent (as the openai package may send them).
  r = parse_chat_request(
      R"({"messages": [{"role": "user", "content": "hi"}], "temperature": null, "tools": []})");
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.request.sampling.temperature, 1.0);
  EXPECT_EQ(r.request.sampling.max_tokens, 0u);
  EXPECT_TRUE(r.request.tools.is_null());
  EXPECT_FALSE(r.request.stream);
  r = parse_chat_request(
      R"({"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 5, "stop": "x"})");
  EXPECT_EQ(r.request.sampling.max_tokens, 5u);
  EXPECT_EQ(r.request.sampling.stop, (std::vector<std::string>{"x"}));
}

TEST(OpenaiApi, RefusesABadRequestNamingTheField) {
  const std::string ok_messages = R"("messages": [{"role": "user", "content": "hi"}])";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{", "body: not valid JSON"},
      {"[1]", "body: expected a JSON object"},
      {"{}", "messages: required"},
      {R"({"messages": []})", "messages: expected at least one message"},
      {R"({"messages": [{"role": "user", "content": 1}]})",
       "messages[0].content: expected a string, null or a list of parts"},
      {"{" + ok_messages + R"(, "n": 2})",
       "n: only 1 is served (open more sessions in a group for more samples)"},
      {"{" + ok_messages + R"(, "temperature": "hot"})",
       "temperature: expected a number in [0, 2]"},
      {"{" + ok_messages + R"(, "temperature": 2.5})", "temperature: expected a number in [0, 2]"},
      {"{" + ok_messages + R"(, "top_p": 0})", "top_p: expected a number in (0, 1]"},
      {"{" + ok_messages + R"(, "max_tokens": 0})",
       "max_tokens: expected a whole number of at least 1"},
      {"{" + ok_messages + R"(, "max_tokens": 1.5})",
       "max_tokens: expected a whole number of at least 1"},
      {"{" + ok_messages + R"(, "stop": ["a", 1]})", "stop[1]: expected a non-empty string"},
      {"{" + ok_messages + R"(, "stop": ["a", "b", "c", "d", "e"]})",
       "stop: expected a string or a list of at most 4 strings"},
      {"{" + ok_messages + R"(, "stream": "yes"})", "stream: expected true or false"},
      {"{" + ok_messages + R"(, "stream_options": {"include_usage": 1}})",
       "stream_options: expected {\"include_usage\": true or false}"},
      {"{" + ok_messages + R"(, "tools": {}})", "tools: expected a list"},
      {"{" + ok_messages + R"(, "tools": [{"type": "function", "function": {}}]})",
       "tools[0].function.name: expected a string"},
      {"{" + ok_messages + R"(, "tools": [{"type": "retrieval"}]})",
       "tools[0]: expected an object of type \"function\""},
      {"{" + ok_messages + R"(, "tool_choice": "always"})",
       "tool_choice: expected \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
       "\"function\": {\"name\": ...}}"},
      {"{" + ok_messages + R"(, "model": 3})", "model: expected a string"},
      {"{" + ok_messages + R"(, "chat_template_kwargs": [1]})",
       "chat_template_kwargs: expected an object"},
  };
  for (const auto& [body, error] : cases) EXPECT_EQ(parse_chat_request(body).error, error) << body;
  EXPECT_EQ(error_field("messages[0].content: expected a string, null or a list of parts"),
            "messages[0].content");
  EXPECT_EQ(error_field("n: only 1 is served (open more sessions in a group for more samples)"),
            "n");
  EXPECT_EQ(error_field("body: not valid JSON"), "");
  EXPECT_EQ(error_field("the request has 1 messages, fewer than the session's 2"), "");
}

TEST(OpenaiApi, ReadsAGenerateRequest) {
  auto r = parse_generate_request(R"({"input_ids": [1, 2, 3], "max_tokens": 8, "temperature": 0})");
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.request.input_ids, (std::vector<llm::token_id>{1, 2, 3}));
  EXPECT_EQ(r.request.sampling.max_tokens, 8u);
  EXPECT_EQ(r.request.sampling.temperature, 0.0);
  EXPECT_EQ(parse_generate_request(R"({"input_ids": []})").error,
            "input_ids: expected a non-empty list of token ids");
  EXPECT_EQ(parse_generate_request(R"({"input_ids": [1, -2]})").error,
            "input_ids[1]: expected a token id (a whole number >= 0)");
  EXPECT_EQ(parse_generate_request(R"({"input_ids": [1, 99999999999]})").error,
            "input_ids[1]: expected a token id (a whole number >= 0)");
  EXPECT_EQ(parse_generate_request(R"({"input_ids": [1], "top_p": 2})").error,
            "top_p: expected a number in (0, 1]");
}

TEST(OpenaiApi, WritesAnswersChunksAndErrorsAsOpenaiDoes) {
  parsed_reply reply;
  reply.content = "It is 4.";
  EXPECT_EQ(finish_reason(reply, false), "stop");
  EXPECT_EQ(finish_reason(reply, true), "length");
  EXPECT_EQ(completion_body("chatcmpl-1", "m", 1700000000, reply, "stop", {10, 3}),
            ojson::parse(R"({"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000,
              "model": "m", "choices": [{"index": 0, "message": {"role": "assistant",
              "content": "It is 4."}, "logprobs": null, "finish_reason": "stop"}],
              "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}})"));
  reply.tool_calls = ojson::parse(
      R"([{"id": "c0", "type": "function", "function": {"name": "f", "arguments": "{}"}}])");
  EXPECT_EQ(finish_reason(reply, true), "tool_calls");
  EXPECT_EQ(chunk_body("chatcmpl-1", "m", 5, {{"content", "It"}}, ""),
            ojson::parse(R"({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 5,
              "model": "m", "choices": [{"index": 0, "delta": {"content": "It"}, "logprobs": null,
              "finish_reason": null}]})"));
  EXPECT_EQ(chunk_body("c", "m", 5, ojson::object(), "stop")["choices"][0]["finish_reason"],
            "stop");
  EXPECT_EQ(error_body(400, "n: only 1", "n"),
            ojson::parse(R"({"error": {"message": "n: only 1", "type": "invalid_request_error",
              "param": "n", "code": null}})"));
  EXPECT_EQ(error_body(409, "x")["error"]["type"], "conflict_error");
  EXPECT_EQ(error_body(404, "x")["error"]["param"], nullptr);
  EXPECT_EQ(error_body(429, "x")["error"]["type"], "rate_limit_error");
  EXPECT_EQ(error_body(500, "x")["error"]["type"], "server_error");
}

}  // namespace
}  // namespace milesrt::agent
