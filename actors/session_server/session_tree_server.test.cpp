// Trajectory trees and subagents through the unmodified `openai` client
// (test/sessions/tree_client.py) against the session_server kind under the real driver: a retried
// turn, an edited tool result and a compaction each branch; the limits answer 409 naming
// themselves; subagents train in their parent's group. The group the learner trains on holds
// one sample per trajectory with its own mask, log-probs and reward.
#include <sys/wait.h>

#include "actors/session_server/session_server_testing.hpp"

namespace milesrt::session_server {
namespace {
using namespace milesrt::session_server::testing;

bool have_openai() {
  return std::system(("'" + std::string(MILESRT_PYTHON) + "' -c 'import openai' >/dev/null 2>&1")
                         .c_str()) == 0;
}

/// The runs of sampled tokens in a sample's output: (first, length) each.
std::vector<std::pair<size_t, size_t>> sampled_runs(const llm::sample_msg& s) {
  std::vector<std::pair<size_t, size_t>> runs;
  for (size_t i = 0; i < s.mask.size(); ++i) {
    if (!s.mask[i]) continue;
    if (i == 0 || !s.mask[i - 1]) runs.push_back({i, 0});
    runs.back().second++;
  }
  return runs;
}

TEST_F(SessionServer, TreesAndSubagentsFromTheOpenAiClientTrainWithTheirMasks) {
  if (!have_openai()) GTEST_SKIP() << "the Python package openai is not installed";
  port_ = start(1, kModel, ", maxBranches = 4, maxRollbackTurns = 3");
  const auto out = dir_ / "client.out";
  const std::string cmd = "'" + std::string(MILESRT_PYTHON) + "' '" +
                          std::string(MILESRT_SOURCE_DIR) + "/test/sessions/tree_client.py' " +
                          "http://127.0.0.1:" + std::to_string(port_) + " >'" + out.string() +
                          "' 2>&1";
  const int raw = std::system(cmd.c_str());
  std::ifstream in(out);
  const std::string said((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, 0) << said;
  auto o = outcome_.get();
  ASSERT_TRUE(o.ok) << o.error;
  std::lock_guard<std::mutex> lock(log_->m);
  ASSERT_EQ(log_->groups.size(), 1u);
  const auto& g = log_->groups[0];
  // A's four trajectories, B's one, the subagents C (its parent's reward) and D (its own).
  ASSERT_EQ(g.samples.size(), 7u);
  std::vector<float> rewards;
  for (const auto& s : g.samples) rewards.push_back(s.reward);
  EXPECT_EQ(rewards, (std::vector<float>{0.5f, 1.0f, 0.5f, 0.5f, 0.0f, 0.5f, 0.25f}));
  for (const auto& s : g.samples) {
    ASSERT_EQ(s.mask.size(), s.output.size());
    for (size_t i = 0; i < s.mask.size(); ++i) {
      EXPECT_EQ(s.logprobs[i], s.mask[i] ? -0.5f : 0.0f) << i;  // the scripted log-prob
      EXPECT_EQ(s.versions[i], 7u);
    }
    EXPECT_EQ(s.mask.front(), 1);
  }
  // Trajectories 0-2 share the prompt and the sampled call, token for token; each trains its
  // own turns: 0 the call and answer, 1 the call and the retried turn, 2 the call and two more.
  const auto& a0 = g.samples[0];
  const auto call = sampled_runs(a0).front();
  for (size_t p = 1; p < 3; ++p) {
    EXPECT_EQ(g.samples[p].prompt, a0.prompt);
    ASSERT_GE(g.samples[p].output.size(), call.second);
    EXPECT_TRUE(std::equal(a0.output.begin(), a0.output.begin() + std::ptrdiff_t(call.second),
                           g.samples[p].output.begin()));
  }
  EXPECT_EQ(sampled_runs(a0).size(), 2u);
  EXPECT_EQ(sampled_runs(g.samples[1]).size(), 2u);
  EXPECT_EQ(sampled_runs(g.samples[2]).size(), 3u);
  // The compaction trains its one new turn; its prompt is the summary, not the old turns.
  const auto& compacted = g.samples[3];
  EXPECT_EQ(sampled_runs(compacted).size(), 1u);
  auto tok = llm::tokenizer::load(kModel).tok;
  const auto prompt =
      tok->decode(std::vector<llm::token_id>(compacted.prompt.begin(), compacted.prompt.end()));
  EXPECT_NE(prompt.find("Summary: 1 + 2 = 3"), std::string::npos) << prompt;
  EXPECT_EQ(prompt.find("What is 1 + 2?"), std::string::npos) << prompt;
}

}  // namespace
}  // namespace milesrt::session_server
