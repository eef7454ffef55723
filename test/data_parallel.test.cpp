// Data-parallel trainers through the real milesrt executable on the tiny arithmetic setup:
// graphs/grpo_sync.capnp with `dataParallel = 2` ends with the same weights, bit for bit, as with
// one rank; with `shardOptimizer` (ZeRO-1) it checkpoints per shard and resumes bitwise; and
// validation refuses 0 ranks, more ranks than a step's groups, and a store port in use.

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "test/support/arith_setup.hpp"

namespace {
using namespace milesrt::testing;

const fs::path& setup_dir() { return shared_arith_setup("dp-setup"); }

/// --set overrides that point graphs/grpo_sync.capnp at the tiny setup, 2 groups a step.
std::string setup_paths() {
  const std::string s = setup_dir().string();
  return " --set run.batchSize=2 --set trainer.model=" + s + "/model --set trainer.evalData=" + s +
         "/heldout.jsonl --set rollout.model=" + s + "/model --set data.path=" + s + "/rl.jsonl";
}

/// graphs/grpo_sync.capnp on the tiny setup: `steps` steps of 2 groups, a constant learning rate,
/// micro-batches of at most 100 tokens (a step's two groups of 8 samples are two micro-batches).
std::string grpo(const fs::path& run, int steps, const std::string& extra) {
  return "run graphs/grpo_sync.capnp --run-dir '" + run.string() +
         "' --quiet --set run.steps=" + std::to_string(steps) +
         " --set trainer.evalInterval=0 --set trainer.lrSchedule=constant "
         "--set trainer.microBatchTokens=100 --set trainer.exportDir=" +
         (run / "export").string() + setup_paths() + extra;
}

std::vector<nlohmann::json> steps_of(const fs::path& run) {
  std::vector<nlohmann::json> out;
  std::istringstream in(slurp(run / "metrics.jsonl"));
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(DataParallelGraphs, TwoTrainerRanksEqualOneBitwise) {
  fs::path one = scratch("dp-one"), two = scratch("dp-two");
  auto a = run_milesrt(grpo(one, 3, ""), "dp-one-run");
  ASSERT_EQ(a.status, 0) << a.err;
  auto b = run_milesrt(grpo(two, 3, " --set trainer.dataParallel=2"), "dp-two-run");
  ASSERT_EQ(b.status, 0) << b.err;
  auto sa = steps_of(one), sb = steps_of(two);
  ASSERT_EQ(sa.size(), 3u);
  ASSERT_EQ(sb.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    // Two micro-batches, one a rank: the ranks' gradient sum is the 1-rank run's own addition.
    ASSERT_EQ(sb[i]["metrics"]["train_micro_batches"].get<double>(), 2) << "step " << i + 1;
    EXPECT_EQ(sb[i]["metrics"]["rank_micro_batches"].get<double>(), 1) << "step " << i + 1;
    EXPECT_EQ(sa[i]["metrics"]["reward_mean"], sb[i]["metrics"]["reward_mean"]) << i + 1;
    EXPECT_EQ(sa[i]["metrics"]["grad_norm"], sb[i]["metrics"]["grad_norm"]) << i + 1;
    // The colocated engine reads rank 0's weights: still the trainer's own, bit for bit.
    EXPECT_EQ(sb[i]["metrics"]["train_rollout_logprob_abs_diff_max"].get<double>(), 0.0);
  }
  EXPECT_EQ(slurp(one / "export" / "model.safetensors"),
            slurp(two / "export" / "model.safetensors"))
      << "2 trainer ranks ended with other weights than 1";
}

TEST(DataParallelGraphs, TwoRanksAndTwoEnginesKeepTheRolloutLogprobsExact) {
  // Two rollout replicas (the driver sends each prompt to the least loaded one; publications go to
  // both) beside two trainer ranks: whichever engine sampled a group, it sampled under rank 0's
  // latest weights, so the trainer's log-probs equal the engines' bit for bit at every step.
  fs::path run = scratch("dp-engines");
  auto r = run_milesrt(
      grpo(run, 3, " --set trainer.dataParallel=2 --set rollout.replicas=2 --set run.batchSize=4"),
      "dp-engines-run");
  ASSERT_EQ(r.status, 0) << r.err;
  auto steps = steps_of(run);
  ASSERT_EQ(steps.size(), 3u);
  for (const auto& s : steps) {
    EXPECT_EQ(s["metrics"]["train_rollout_logprob_abs_diff_max"].get<double>(), 0.0) << s.dump();
    EXPECT_EQ(s["staleness"]["0"].get<int>(), 4);
  }
}

TEST(DataParallelGraphs, ShardedOptimizerResumesPerShardBitwise) {
  fs::path whole = scratch("zero-whole"), split = scratch("zero-split");
  const std::string zero =
      " --set trainer.dataParallel=2 --set trainer.shardOptimizer=true "
      "--set run.checkpointInterval=2";
  auto a = run_milesrt(grpo(whole, 4, zero), "zero-a");
  ASSERT_EQ(a.status, 0) << a.err;
  auto b = run_milesrt(grpo(split, 2, zero), "zero-b");
  ASSERT_EQ(b.status, 0) << b.err;
  auto c = run_milesrt(grpo(split, 4, zero + " --resume '" + split.string() + "'"), "zero-c");
  ASSERT_EQ(c.status, 0) << c.err;
  auto sa = steps_of(whole);
  ASSERT_EQ(sa.size(), 4u);
  const double bytes = sa[0]["metrics"]["trainer_optimizer_master_bytes"].get<double>();
  const double params = sa[0]["metrics"]["trainer_trained_params"].get<double>();
  EXPECT_NEAR(bytes / (12 * params), 0.5, 0.01) << "rank 0 should hold half the optimizer";
  EXPECT_EQ(slurp(whole / "export" / "model.safetensors"),
            slurp(split / "export" / "model.safetensors"))
      << "the resumed sharded run's weights differ from the uninterrupted run's";
  // The same checkpoint with other ranks is refused, naming the ranks that wrote it.
  auto d = run_milesrt(grpo(split, 6,
                            " --set trainer.dataParallel=1 --set run.checkpointInterval=2 "
                            "--resume '" +
                                split.string() + "'"),
                       "zero-d");
  EXPECT_NE(d.status, 0);
  EXPECT_NE(d.err.find("resume it with dataParallel = 2"), std::string::npos) << d.err;
}

TEST(DataParallelGraphs, ValidationRefusesZeroRanksTooManyRanksAndAPortInUse) {
  const std::string base = "validate graphs/grpo_sync.capnp" + setup_paths();
  auto zero = run_milesrt(base + " --set trainer.dataParallel=0", "dp-zero");
  EXPECT_NE(zero.status, 0);
  EXPECT_NE(zero.err.find("params.trainer.dataParallel: must be at least 1"), std::string::npos)
      << zero.err;
  auto many = run_milesrt(base + " --set trainer.dataParallel=3", "dp-many");
  EXPECT_NE(many.status, 0);
  EXPECT_NE(many.err.find("params.trainer.dataParallel: 3 ranks, but a step has only 2 groups"),
            std::string::npos)
      << many.err;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const std::string port = std::to_string(ntohs(a.sin_port));
  auto taken = run_milesrt(base + " --set trainer.dataParallel=2 --set trainer.storePort=" + port,
                           "dp-port");
  ::close(fd);
  EXPECT_NE(taken.status, 0);
  EXPECT_NE(taken.err.find("params.trainer.storePort: port " + port + " on 127.0.0.1 is in use"),
            std::string::npos)
      << taken.err;
  auto fine = run_milesrt(base + " --set trainer.dataParallel=2", "dp-fine");
  EXPECT_EQ(fine.status, 0) << fine.err;
}

}  // namespace
