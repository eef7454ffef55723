// Data-parallel trainers through the real milesrt executable on the tiny arithmetic setup:
// graphs/grpo_sync.capnp with `dataParallel = 2` ends with the same weights, bit for bit, as with
// one rank; with `shardOptimizer` (ZeRO-1) it checkpoints per shard and resumes bitwise; two
// rollout engines share the groups (the driver's per-replica item counts) and one killed mid-run
// is replaced with nothing lost; a rank that dies mid-step fails the run, and `--supervise` resumes
// it to the uninterrupted run's weights; and validation refuses 0 ranks, more ranks than a step's
// groups, and a store port in use.

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include "test/support/arith_setup.hpp"
#include "test/support/metrics_log.hpp"

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
         "' --quiet --set run.maxOverSampling=0 --set run.steps=" + std::to_string(steps) +
         " --set trainer.evalInterval=0 --set trainer.lrSchedule=constant "
         "--set trainer.microBatchTokens=100 --set trainer.exportDir=" +
         (run / "export").string() + setup_paths() + extra;
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

/// Sets a test hook's environment variable (docs/testing.md) for the runs of one scope.
struct scoped_env {
  std::string name;
  scoped_env(std::string n, const std::string& value) : name(std::move(n)) {
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~scoped_env() { ::unsetenv(name.c_str()); }
};

double metric(const nlohmann::json& step, const std::string& name) {
  EXPECT_TRUE(step["metrics"].contains(name)) << name << " missing: " << step.dump();
  return step["metrics"].value(name, -1.0);
}

TEST(DataParallelGraphs, TheRouterSpreadsGroupsOverTwoEnginesAndReplacesAKilledOne) {
  // Two engines, 4 steps of 4 groups (8 samples each). The driver kills engine 1 right after
  // sending it its 14th group (in step 2 here: a step admits more groups than it keeps, the filter
  // drops the rest): it dies with that group unanswered, is replaced through the restart path
  // while engine 0 keeps serving, and nothing is lost.
  fs::path run = scratch("engines-killed");
  result r;
  {
    scoped_env kill("MILESRT_TEST_KILL_REPLICA", "rollout:1:14");
    r = run_milesrt(grpo(run, 4, " --set rollout.replicas=2 --set run.batchSize=4"),
                    "engines-killed-run");
  }
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("test fault: killing actor 'rollout' (replica 1) after its work item 14"),
            std::string::npos)
      << r.err;
  auto steps = steps_of(run);
  ASSERT_EQ(steps.size(), 4u);
  std::set<uint64_t> trained;
  double served[2] = {0, 0};
  int admitted = 0;
  for (const auto& s : steps) {
    const double a = metric(s, "rollout_replica_items/0"), b = metric(s, "rollout_replica_items/1");
    // The router places prompts: a group's 8 samples come back from one engine in one answer, so
    // the engines' items add up to the groups admitted in the step (the filter drops the groups
    // whose samples all scored alike; sync admits no more until the step is trained), while the
    // trainer trains the batch's 4 x 8 samples.
    const int now = s["counters"]["admitted"].get<int>();
    EXPECT_EQ(a + b, now - admitted) << s.dump();
    admitted = now;
    EXPECT_EQ(s["lists"]["response_length"].size(), 32u) << s.dump();
    served[0] += a;
    served[1] += b;
    ASSERT_EQ(s["origins"].size(), 4u);
    for (auto o : s["origins"])
      EXPECT_TRUE(trained.insert(o.get<uint64_t>()).second) << "item " << o << " trained twice";
    EXPECT_EQ(s["staleness"]["0"].get<int>(), 4) << s.dump();
    EXPECT_EQ(s["counters"]["stale_violations"].get<int>(), 0);
    // The replacement generates under the newest weights, as the engine it replaced did.
    EXPECT_EQ(metric(s, "train_rollout_logprob_abs_diff_max"), 0.0) << s.dump();
  }
  // The step of the kill: where the restart is counted (which step depends on how the router
  // split the earlier steps' groups, about evenly).
  size_t k = 0;
  while (k < steps.size() && steps[k]["counters"]["restarts"].get<int>() == 0) ++k;
  ASSERT_LT(k, 3u) << "engine 1 was not killed before the last step";
  for (size_t i = k; i < steps.size(); ++i)
    EXPECT_EQ(steps[i]["counters"]["restarts"].get<int>(), 1) << steps[i].dump();
  // Both engines serve in the first step; engine 0 goes on in the step of the kill, and the
  // replacement serves after it.
  EXPECT_GT(metric(steps[0], "rollout_replica_items/0"), 0);
  EXPECT_GT(metric(steps[0], "rollout_replica_items/1"), 0);
  EXPECT_GT(metric(steps[k], "rollout_replica_items/0"), 0) << "engine 0 stopped serving";
  double replacement = 0;
  for (size_t i = k + 1; i < steps.size(); ++i)
    replacement += metric(steps[i], "rollout_replica_items/1");
  EXPECT_GT(replacement, 0) << "the replacement did not serve";
  auto summary = nlohmann::json::parse(slurp(run / "summary.json"));
  const auto& c = summary["counters"];
  EXPECT_EQ(c["restarts"].get<int>(), 1) << c.dump();
  EXPECT_GE(c["requeued"].get<int>(), 1) << "the killed engine held no group: " << c.dump();
  EXPECT_EQ(c["in_flight"].get<int>(), 0);
  // Every admitted group answered once, by one engine, and then kept or filtered out.
  EXPECT_EQ(served[0] + served[1], c["admitted"].get<double>()) << c.dump();
  EXPECT_EQ(c["accepted"].get<int>(), 16) << c.dump();
  EXPECT_EQ(c["admitted"].get<int>(), c["accepted"].get<int>() + c["filtered"].get<int>())
      << c.dump();
}

TEST(DataParallelGraphs, ARankThatDiesEndsTheRunAndSuperviseResumesIt) {
  // Two trainer ranks, 4 steps, a checkpoint every 2. Rank 1 dies in step 3 (the test hook throws
  // in its part of the step): without --supervise the run fails naming the rank; with it the run
  // resumes from step 2's checkpoint and ends as the uninterrupted run does, bit for bit.
  const std::string dp = " --set trainer.dataParallel=2 --set run.checkpointInterval=2";
  fs::path calm = scratch("rank-calm"), died = scratch("rank-died"), saved = scratch("rank-saved");
  auto a = run_milesrt(grpo(calm, 4, dp), "rank-calm-run");
  ASSERT_EQ(a.status, 0) << a.err;
  result b, c;
  {
    scoped_env dies("MILESRT_TEST_RANK_DIES", "1:3");
    b = run_milesrt(grpo(died, 4, dp), "rank-died-run");
    c = run_milesrt(grpo(saved, 4, dp + " --supervise --max-restarts 1"), "rank-saved-run");
  }
  const std::string named = "died mid-step: killed by the test hook MILESRT_TEST_RANK_DIES";
  EXPECT_EQ(b.status, 1) << b.err;
  EXPECT_NE(b.err.find("rank 1 of 2 (store 127.0.0.1:"), std::string::npos) << b.err;
  EXPECT_NE(b.err.find(named), std::string::npos) << b.err;
  EXPECT_EQ(steps_of(died).size(), 2u);
  ASSERT_EQ(c.status, 0) << c.err;
  EXPECT_NE(c.err.find(named), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("exited with status 1; restarting from checkpoint " +
                       (saved / "checkpoints" / "step-2").string()),
            std::string::npos)
      << c.err;
  auto sa = steps_of(calm), sc = steps_of(saved);
  ASSERT_EQ(sa.size(), 4u);
  ASSERT_EQ(sc.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(sc[i]["step"].get<int>(), int(i) + 1);
    EXPECT_EQ(sa[i]["origins"], sc[i]["origins"]) << "step " << i + 1;
    for (const char* m : {"loss", "grad_norm", "reward_mean", "train_rollout_logprob_abs_diff_max"})
      EXPECT_EQ(sa[i]["metrics"][m], sc[i]["metrics"][m]) << m << " at step " << i + 1;
  }
  EXPECT_EQ(slurp(calm / "export" / "model.safetensors"),
            slurp(saved / "export" / "model.safetensors"))
      << "the resumed run's weights differ from the uninterrupted run's";
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

nlohmann::json bench_train(const std::string& extra, const std::string& tag) {
  const auto r = run_milesrt("bench train --model " + (setup_dir() / "model").string() +
                                 " --device cpu --seqs 8 --prompt 6 --response 6 --steps 1"
                                 " --micro-batch-tokens 24" +
                                 extra,
                             tag);
  EXPECT_EQ(r.status, 0) << r.err;
  return nlohmann::json::parse(r.out.substr(r.out.find('{')));
}

TEST(BenchTrain, DataParallelRanksAndZeroOneReportTheirStep) {
  // `bench train --data-parallel 2` runs the trainer kind's ranks (threads, Gloo); with
  // --shard-optimizer each rank holds half the optimizer state (rank 0's bytes reported).
  const auto one = bench_train("", "bench-dp1");
  const auto two = bench_train(" --data-parallel 2", "bench-dp2");
  const auto sharded = bench_train(" --data-parallel 2 --shard-optimizer", "bench-dp2z");
  EXPECT_EQ(two["data_parallel"], 2);
  EXPECT_EQ(two["shard_optimizer"], false);
  EXPECT_EQ(sharded["shard_optimizer"], true);
  EXPECT_GT(two["train_tokens_per_s"].get<double>(), 0.0);
  const double full = one["trainer_optimizer_master_bytes"].get<double>();
  EXPECT_EQ(two["trainer_optimizer_master_bytes"].get<double>(), full);
  EXPECT_LE(sharded["trainer_optimizer_master_bytes"].get<double>(), 0.5 * full + 4096);
  EXPECT_GE(sharded["trainer_optimizer_master_bytes"].get<double>(), 0.5 * full - 4096);
  const auto r = run_milesrt("bench train --data-parallel 0", "bench-dp0");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--data-parallel"), std::string::npos) << r.err;
}

}  // namespace
