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
std::unique_ptr<agent::session_tree> two_turns(const llm::tokenizer& tok, const std::string& first,
                                               const std::string& second) {
  auto tok_ptr = std::shared_ptr<const llm::tokenizer>(&tok, [](const llm::tokenizer*) {});
  auto s = std::make_unique<agent::session_tree>(tok_ptr, nullptr);
  auto ids = tok.encode("<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_FALSE(s->extend_ids(ids).error);
  auto sampled = [&](const std::string& text) {
    auto out = tok.encode(text + "<|im_end|>");
    s->current().append_sampled(out, std::vector<float>(out.size(), -0.5f), 3);
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
  g.sessions.push_back({"a",
                        two_turns(*tok, "I will add.", "The answer is 5."),
                        std::nullopt,
                        {},
                        {{"label", "5"}},
                        ""});
  g.sessions.push_back(
      {"b", two_turns(*tok, "Adding.", "It is 6."), 1.0, {}, {{"label", "5"}}, ""});
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
  g.sessions.push_back({"a", two_turns(*tok, "x", "y"), 0.5, {}, nullptr, ""});
  g.sessions.push_back(
      {"b", two_turns(*tok, "x", "z"), 1.0, {}, {{"label", 3}}, ""});  // not a string
  EXPECT_FALSE(has_unrewarded(g));
  EXPECT_EQ(group_label(g), "q8");
  uint64_t empty = 0;
  auto e = to_envelope(g, 0, 0, empty);  // no tokenizer: no text
  EXPECT_EQ(e.payload.get_as<llm::sample_group>(0).samples[0].text, "");
  // A dropped session (no tokens) needs no reward.
  agent::finished_group d;
  d.sessions.push_back({"c", nullptr, std::nullopt, {}, nullptr, ""});
  EXPECT_FALSE(has_unrewarded(d));
}

// A tree's trajectories are each a sample: a path's own reward (`/end`'s `rewards`) over the
// session's; a subagent without a reward takes its parent's, with one keeps its own.
TEST(Trajectory, EachTrainedPathIsASampleWithItsOwnRewardAndSubagentsTakeTheirParents) {
  auto tok = qwen3();
  agent::finished_group g;
  g.group = "q9";
  auto tree = two_turns(*tok, "x", "y");
  // A second path: the second turn retried (ids departing after the first turn).
  auto ids = tree->tokens().ids;
  ids.resize(ids.size() - tok->encode("y<|im_end|>").size());
  ASSERT_FALSE(tree->extend_ids(ids).error);
  const auto w = tok->encode("w<|im_end|>");
  tree->current().append_sampled(w, std::vector<float>(w.size(), -0.5f), 3);
  ASSERT_EQ(tree->path_count(), 2u);
  g.sessions.push_back({"a", std::move(tree), 0.25, {{1, 1.0}}, nullptr, ""});
  g.sessions.push_back({"b", two_turns(*tok, "x", "z"), std::nullopt, {}, nullptr, "a"});
  g.sessions.push_back({"c", two_turns(*tok, "x", "v"), 0.5, {}, nullptr, "a"});
  EXPECT_FALSE(has_unrewarded(g));
  uint64_t empty = 0;
  auto e = to_envelope(g, 0, 0, empty);
  const auto& samples = e.payload.get_as<llm::sample_group>(0).samples;
  ASSERT_EQ(samples.size(), 4u);
  EXPECT_EQ(samples[0].reward, 0.25f);  // path 0: the session's
  EXPECT_EQ(samples[1].reward, 1.0f);   // path 1: its own
  EXPECT_EQ(samples[2].reward, 0.25f);  // the subagent without one: its parent's
  EXPECT_EQ(samples[3].reward, 0.5f);   // the subagent with one
  // The retried path shares the first path's prompt and first turn, masks as stored.
  EXPECT_EQ(samples[0].prompt, samples[1].prompt);
  EXPECT_NE(samples[0].output, samples[1].output);
  EXPECT_EQ(samples[1].mask.back(), 1);
  // lastLeaf trains the retried path only.
  empty = 0;
  auto last = to_envelope(g, 0, 0, empty, nullptr, agent::train_on::last_leaf);
  EXPECT_EQ(last.payload.get_as<llm::sample_group>(0).samples.size(), 3u);
}

}  // namespace
}  // namespace milesrt::session_server
