// A session's tokens as a trajectory, checked by hand: the prompt ends before the first sampled
// token, the environment's tokens are masked out and take the version of the sampled token
// before them, and the version span covers the sampled tokens only.
#include "actors/lib/agent/trajectory.hpp"

#include <gtest/gtest.h>

#include "actors/lib/llm/tokenizer/tokenizer.hpp"

namespace milesrt::agent {
namespace {

session_tokens hand_made() {
  using o = token_origin;
  session_tokens t;
  t.ids = {10, 11, 12, 20, 21, 13, 14, 22};
  t.origins = {o::environment, o::environment, o::environment, o::sampled,
               o::sampled,     o::environment, o::environment, o::sampled};
  t.logprobs = {0, 0, 0, -0.5f, -0.25f, 0, 0, -1.0f};
  t.versions = {0, 0, 0, 3, 4, 0, 0, 5};
  return t;
}

TEST(AgentTrajectory, SplitsAtTheFirstSampledTokenAndMasksTheEnvironment) {
  const auto t = to_trajectory(hand_made());
  EXPECT_EQ(t.prompt, (std::vector<int64_t>{10, 11, 12}));
  EXPECT_EQ(t.output, (std::vector<int64_t>{20, 21, 13, 14, 22}));
  EXPECT_EQ(t.mask, (std::vector<uint8_t>{1, 1, 0, 0, 1}));
  EXPECT_EQ(t.logprobs, (std::vector<float>{-0.5f, -0.25f, 0, 0, -1.0f}));
  EXPECT_EQ(t.versions, (std::vector<uint64_t>{3, 4, 4, 4, 5}));
  EXPECT_EQ(t.min_version, 3u);
  EXPECT_EQ(t.max_version, 5u);
}

TEST(AgentTrajectory, NoSampledTokenGivesAnEmptyOutput) {
  auto tokens = hand_made();
  for (auto& o : tokens.origins) o = token_origin::environment;
  const auto t = to_trajectory(tokens);
  EXPECT_EQ(t.prompt.size(), tokens.size());
  EXPECT_TRUE(t.output.empty());
  EXPECT_TRUE(t.mask.empty());
}

TEST(AgentTrajectory, ASessionsTokensInOrder) {
  auto tok = llm::tokenizer::load(std::string(MILESRT_CHAT_TEMPLATE_DATA) + "/Qwen-Qwen3-0.6B");
  ASSERT_TRUE(tok.tok) << tok.error;
  auto tmpl = llm::chat_template::from_model(*tok.tok);
  ASSERT_TRUE(tmpl.tmpl) << tmpl.error;
  session s(tok.tok, tmpl.tmpl);
  auto messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "2+2?"}])");
  ASSERT_FALSE(s.extend(messages, {}).error);
  const size_t prompt = s.tokens().size();
  auto ids = tok.tok->encode("4", false);
  s.append_sampled(ids, std::vector<float>(ids.size(), -0.1f), 7,
                   {{"role", "assistant"}, {"content", "4"}});
  const auto t = to_trajectory(s.tokens());
  ASSERT_EQ(t.prompt.size(), prompt);
  std::vector<int64_t> all = t.prompt;
  all.insert(all.end(), t.output.begin(), t.output.end());
  EXPECT_EQ(all, std::vector<int64_t>(s.tokens().ids.begin(), s.tokens().ids.end()));
  EXPECT_EQ(t.mask, std::vector<uint8_t>(ids.size(), 1));
  EXPECT_EQ(t.min_version, 7u);
}

}  // namespace
}  // namespace milesrt::agent
