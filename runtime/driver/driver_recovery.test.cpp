// The driver's recovery: restarts bounded by count, window and start-up failures; writes that
// fail; async resumes whose stages start from their files and receive the restored version over
// two hops.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "runtime/driver/driver_testing.hpp"

namespace milesrt::runtime {
namespace {

using namespace driver_testing;

// A restartable replica that dies at every message dies before answering anything, each
// incarnation: a failure at start-up, which a restart repeats. The third such death in a row ends
// the run naming the actor and the cause, instead of restarting it forever.
TEST_F(Driver, ARepeatedStartupFailureEndsTheRun) {
  auto fields = testing::toy_graph("", sync_schedule(), kRun);
  fields.replace(fields.find("\"toy_stage\""), 11, "\"toy_mortal_stage\"");
  auto o = run(fields, nullptr, false, {"stage.die_per_mille=1000"});
  ASSERT_FALSE(o.ok);
  EXPECT_EQ(o.counters.restarts, 2u);
  EXPECT_NE(
      o.error.find("actor 'stage' (replica 0, kind toy_mortal_stage) died at start-up (before "
                   "answering anything) 3 times in a row (run.maxStartupFailures 3); last "
                   "cause: "),
      std::string::npos)
      << o.error;
  EXPECT_NE(o.error.find("toy stage killed at random"), std::string::npos) << o.error;
}

// A replica that answers, then dies, again and again: restarted at most run.maxRestarts times
// within run.restartWindowSeconds, then the run ends naming the actor, the limit and the cause.
TEST_F(Driver, RestartsOfAReplicaAreBoundedWithinTheWindow) {
  auto fields = testing::toy_graph("", sync_schedule(),
                                   "(steps = 200, batchSize = 4, maxRestarts = 2, "
                                   "maxStartupFailures = 1000)");
  fields.replace(fields.find("\"toy_stage\""), 11, "\"toy_mortal_stage\"");
  auto o = run(fields, nullptr, false, {"stage.die_per_mille=100"});
  ASSERT_FALSE(o.ok);
  EXPECT_EQ(o.counters.restarts, 2u);
  EXPECT_NE(o.error.find("actor 'stage' (replica 0, kind toy_mortal_stage) was restarted 2 times "
                         "within 600 s and died again (run.maxRestarts 2, run.restartWindowSeconds "
                         "600); last cause: "),
            std::string::npos)
      << o.error;
}

// metrics.jsonl on a full device: the first step that cannot be recorded ends the run naming the
// file and the reason, and the summary claims no step the log lacks.
TEST_F(Driver, AFailedMetricsWriteEndsTheRun) {
  std::filesystem::create_directories(dir_ / "run");
  std::filesystem::create_symlink("/dev/full", dir_ / "run" / "metrics.jsonl");
  auto o = run(testing::toy_graph("", sync_schedule(), kRun));
  ASSERT_FALSE(o.ok);
  EXPECT_EQ(o.error, "step 1 was not recorded: cannot write " +
                         (dir_ / "run" / "metrics.jsonl").string() + ": No space left on device");
  std::ifstream in(dir_ / "run" / "summary.json");
  EXPECT_EQ(nlohmann::json::parse(in)["steps"], 0u);
}

// Stages that start from their files after a resume (the version is not in their state, as a
// stage's parameters read from files are not) and a publication of two hops (learner -> relay ->
// stage): async runs resumed at random steps, with and without random kills of the stage, under
// random delivery orders. No item is admitted before every stage holds the restored version: every
// item trained after the resume was made with it or a newer one, and the bound holds.
TEST_F(Schedules, AsyncResumeAdmitsNothingBeforeStagesHoldTheRestoredVersion) {
  std::mt19937 rng(23);
  size_t checked = 0;
  for (int i = 0; i < 200 && !HasFailure(); ++i) {
    auto in = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    auto c = random_case(rng);
    c.async = true;
    c.drop = in(0, 3) == 0;
    const bool kills = in(0, 1) == 1;
    // The first run ends at its checkpoint: what it admitted is what the checkpoint knows of.
    const int interval = in(1, 3), first_steps = interval, total = first_steps + 3;
    auto graph_of = [&](int steps) {
      auto f = fields(c, steps, interval);
      const std::string drop = "value = (int = " + std::to_string(c.drop_every) + "))";
      f.replace(f.find(drop), drop.size(),
                drop + ", (name = \"restores_version\", value = (bool = false))" +
                    (kills ? ", (name = \"die_per_mille\", value = (int = 30))" : ""));
      if (kills) f.replace(f.find("\"toy_stage\""), 11, "\"toy_mortal_stage\"");
      if (kills)
        f.replace(f.find("checkpointInterval"), 18, kUnlimitedRestarts + "checkpointInterval");
      const std::string learner = "(name = \"learner\", kind = \"toy_learner\")";
      f.replace(f.find(learner), learner.size(),
                learner + ",\n(name = \"relay\", kind = \"toy_relay\")");
      const std::string edge = "(from = \"learner.weights\", to = \"stage.weights\")";
      f.replace(f.find(edge), edge.size(),
                "(from = \"learner.weights\", to = \"relay.weights\"), "
                "(from = \"relay.updates\", to = \"stage.weights\")");
      return f;
    };
    SCOPED_TRACE("case " + std::to_string(i) + (c.drop ? " drop" : "") + (kills ? " kills" : "") +
                 " s=" + std::to_string(c.staleness) + " batch=" + std::to_string(c.batch) +
                 " replicas=" + std::to_string(c.replicas) + " resumed at " +
                 std::to_string(interval));
    auto run_dir = dir_ / ("v" + std::to_string(i));
    auto g1 = load("v" + std::to_string(i) + "a.capnp", graph_of(first_steps));
    auto g2 = load("v" + std::to_string(i) + "b.capnp", graph_of(total));
    ASSERT_TRUE(g1 && g2);
    records first, second;
    auto o1 = run_random(*g1, rng, first, run_dir, false);
    ASSERT_TRUE(o1.ok) << o1.error;
    auto o2 = run_random(*g2, rng, second, run_dir, true);
    ASSERT_TRUE(o2.ok) << o2.error;
    ASSERT_EQ(second.front().step, uint64_t(interval + 1));
    std::set<uint64_t> trained;
    records kept(first.begin(), first.begin() + interval);
    check_run(o1, kept, true, c.staleness, c.batch, &trained);
    check_run(o2, second, true, c.staleness, c.batch, &trained);
    // Step k trains at version k - 1: an item of staleness s there was made with version k - 1 - s.
    // Checked on the steps made only of items admitted after the resume (the others may hold
    // items made before the checkpoint, with older versions and within the bound).
    for (const auto& r : second) {
      bool fresh = true;
      for (auto origin : r.batch_origins) fresh = fresh && origin > o1.counters.admitted;
      if (!fresh) continue;
      for (const auto& [staleness, n] : r.staleness) {
        EXPECT_GE(int64_t(r.step) - 1 - int64_t(staleness), interval)
            << n << " items of step " << r.step << " were made before the restored version";
        checked += n;
      }
    }
  }
  EXPECT_GT(checked, 500u);
}

}  // namespace
}  // namespace milesrt::runtime
