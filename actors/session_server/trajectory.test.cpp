// An ended group as it goes down the graph: for the graph's reward actor, the label from the
// sessions' metadata and each session's last turn as its text; which groups need scoring.
#include "actors/session_server/trajectory.hpp"

#include <gtest/gtest.h>

#include "actors/lib/llm/tokenizer/tokenizer.hpp"

namespace milesrt::session_server {
namespace {

std::shared_ptr<const llm::tokenizer> qwen3() {
  auto t = llm::tokenizer::load(std::string(MILESRT_TOKENIZER_DATA) + "/qwen3");
  if (!t.tok) throw std::runtime_error(t.error);
  return t.tok;
}

/// A session driven by ids: a prompt, a sampled turn, a tool's answer, a second sampled turn.
std::unique_ptr<agent::session> two_turns(const llm::tokenizer& tok, const std::string& first,
                                          const std::string& second) {
  auto tok_ptr = std::shared_ptr<const llm::tokenizer>(&tok, [](const llm::tokenizer*) {});
  auto s = std::make_unique<agent::session>(tok_ptr, nullptr);
  auto ids = tok.encode("<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_FALSE(s->extend_ids(ids).error);
  auto sampled = [&](const std::string& text) {
    auto out = tok.encode(text + "<|im_end|>");
    s->append_sampled(out, std::vector<float>(out.size(), -0.5f), 3);
    return out;
  };
  auto a = sampled(first);
  ids.insert(ids.end(), a.begin(), a.end());
  auto env = tok.encode(
      "\n<|im_start|>user\n<tool_response>\n5\n</tool_response><|im_end|>\n"
      "<|im_start|>assistant\n");
  ids.insert(ids.end(), env.begin(), env.end());
  EXPECT_FALSE(s->extend_ids(ids).error);
  sampled(second);
  return s;
}

TEST(Trajectory, AnUnrewardedGroupCarriesItsLabelAndEachSessionsLastTurn) {
  auto tok = qwen3();
  agent::finished_group g;
  g.group = "q7";
  g.sessions.push_back(
      {"a", two_turns(*tok, "I will add.", "The answer is 5."), std::nullopt, {{"label", "5"}}});
  g.sessions.push_back({"b", two_turns(*tok, "Adding.", "It is 6."), 1.0, {{"label", "5"}}});
  EXPECT_TRUE(has_unrewarded(g));
  EXPECT_EQ(group_label(g), "5");
  uint64_t empty = 0;
  auto e = to_envelope(g, 4, 0, empty, tok.get());
  const auto& group = e.payload.get_as<llm::sample_group>(0);
  EXPECT_EQ(group.group_id, 4u);
  EXPECT_EQ(group.label, "5");
  ASSERT_EQ(group.samples.size(), 2u);
  EXPECT_EQ(group.samples[0].text, "The answer is 5.");
  EXPECT_EQ(group.samples[1].text, "It is 6.");
  EXPECT_EQ(group.samples[0].reward, 0.0f);  // the reward actor's to set
  EXPECT_EQ(group.samples[1].reward, 1.0f);
  EXPECT_EQ(e.min_version, 3u);
}

TEST(Trajectory, AGroupWithoutLabelsIsLabelledByItsNameAndRewardedGroupsNeedNoScoring) {
  auto tok = qwen3();
  agent::finished_group g;
  g.group = "q8";
  g.sessions.push_back({"a", two_turns(*tok, "x", "y"), 0.5, nullptr});
  g.sessions.push_back({"b", two_turns(*tok, "x", "z"), 1.0, {{"label", 3}}});  // not a string
  EXPECT_FALSE(has_unrewarded(g));
  EXPECT_EQ(group_label(g), "q8");
  uint64_t empty = 0;
  auto e = to_envelope(g, 0, 0, empty);  // no tokenizer: no text
  EXPECT_EQ(e.payload.get_as<llm::sample_group>(0).samples[0].text, "");
  // A dropped session (no tokens) needs no reward.
  agent::finished_group d;
  d.sessions.push_back({"c", nullptr, std::nullopt, nullptr});
  EXPECT_FALSE(has_unrewarded(d));
}

}  // namespace
}  // namespace milesrt::session_server
