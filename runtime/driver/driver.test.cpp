// The schedule driver with real CAF actors (the toy kinds): lockstep and bounded staleness,
// filters, deadlines, dead and restarted actors, checkpoints and resume; then the schedule
// properties over many random delivery orders under CAF's deterministic test scheduler.
#include "runtime/driver/driver.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <csignal>
#include <cstring>
#include <fstream>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/driver/driver_testing.hpp"
#include "runtime/driver/run.hpp"
#include "runtime/graph/check_kinds.hpp"
#include "runtime/graph/overrides.hpp"
#include "runtime/graph/validate.hpp"
#include "runtime/testing/scratch_graph.hpp"

namespace milesrt::runtime {
namespace {

using namespace driver_testing;

TEST_F(Driver, SyncIsLockstep) {
  records steps;
  auto o = run(testing::toy_graph(", replicas = 3", sync_schedule(), kRun), &steps);
  ASSERT_TRUE(o.ok) << o.error;
  EXPECT_EQ(o.steps, 5u);
  EXPECT_EQ(o.version, 5u);
  ASSERT_EQ(steps.size(), 5u);
  std::set<uint64_t> trained;
  check_run(o, steps, false, 0, 4, &trained);
  EXPECT_EQ(trained, (std::set<uint64_t>{1,  2,  3,  4,  5,  6,  7,  8,  9,  10,
                                         11, 12, 13, 14, 15, 16, 17, 18, 19, 20}));
  EXPECT_EQ(o.counters.admitted, 20u);
  // The toy learner sums the numbers 0..19 it was given, in lockstep order.
  EXPECT_EQ(steps.back().metrics.at("total"), 190.0);
  EXPECT_TRUE(std::filesystem::exists(dir_ / "run" / "metrics.jsonl"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "run" / "summary.json"));
}

TEST_F(Driver, EachStepCountsTheItemsEveryReplicaAnswered) {
  records steps;
  auto o = run(testing::toy_graph(", replicas = 3", sync_schedule(), kRun), &steps);
  ASSERT_TRUE(o.ok) << o.error;
  ASSERT_EQ(steps.size(), 5u);
  std::vector<double> served(3, 0);
  for (const auto& s : steps) {
    double items = 0;
    for (size_t r = 0; r < 3; ++r) {
      const std::string name = "stage_replica_items/" + std::to_string(r);
      ASSERT_TRUE(s.metrics.count(name)) << name << " missing at step " << s.step;
      items += s.metrics.at(name);
      served[r] += s.metrics.at(name);
    }
    EXPECT_EQ(items, 4.0) << "step " << s.step;  // the step's batch, each item answered once
    // Actors of one replica get none.
    for (const auto& [k, v] : s.metrics) {
      if (k.find("_replica_items/") != std::string::npos) {
        EXPECT_EQ(k.rfind("stage_replica_items/", 0), 0u) << k;
      }
    }
  }
  for (size_t r = 0; r < 3; ++r) EXPECT_GT(served[r], 0) << "replica " << r << " never served";
}

TEST_F(Driver, ActiveSecondsCountOverlappingRequestsOnceAndIdleIsTheRest) {
  records steps;
  const std::string slow =
      ", replicas = 3, params = (custom = [(name = \"delay_ms\", value = (int = 20))])";
  auto o = run(testing::toy_graph(slow, sync_schedule(), kRun), &steps);
  ASSERT_TRUE(o.ok) << o.error;
  ASSERT_EQ(steps.size(), 5u);
  for (const auto& s : steps) {
    ASSERT_TRUE(s.active_seconds.count("stage")) << "step " << s.step;
    ASSERT_TRUE(s.active_seconds.count("learner")) << "step " << s.step;
    double most = 0;
    for (const auto& [actor, secs] : s.active_seconds) {
      EXPECT_LE(secs, s.seconds + 1e-9) << actor << ", step " << s.step;
      // Requests that overlap count once here, each in full in busy_seconds.
      EXPECT_LE(secs, s.busy_seconds.at(actor) + 1e-6) << actor << ", step " << s.step;
      most = std::max(most, secs);
    }
    // Each step waits for 4 items of 20 ms on 3 replicas: at least one item's time.
    EXPECT_GE(s.active_seconds.at("stage"), 0.019) << "step " << s.step;
    EXPECT_GE(s.idle_seconds, 0.0);
    EXPECT_LE(s.idle_seconds + most, s.seconds + 1e-9) << "step " << s.step;
  }
}

TEST(ReplicaFault, ParsesActorReplicaAndItems) {
  auto f = parse_replica_fault("stage:1:3");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->actor, "stage");
  EXPECT_EQ(f->replica, 1u);
  EXPECT_EQ(f->after, 3u);
  for (const char* bad : {"", "stage", "stage:1", ":1:3", "stage:x:3", "stage:1:0", "stage:1:3x"})
    EXPECT_FALSE(parse_replica_fault(bad)) << bad;
}

TEST_F(Driver, AsyncKeepsTheStalenessBound) {
  for (int s : {0, 1, 3}) {
    for (bool drop : {false, true}) {
      records steps;
      auto o = run(testing::toy_graph(", replicas = 2", async_schedule(s, drop), kRun), &steps);
      ASSERT_TRUE(o.ok) << o.error;
      EXPECT_EQ(o.steps, 5u);
      check_run(o, steps, true, s, 4);
    }
  }
}

TEST_F(Driver, FilteredItemsAreReplacedByOverSampling) {
  records steps;
  auto o =
      run(testing::toy_graph(", params = (custom = [(name = \"drop_every\", value = (int = 3))])",
                             sync_schedule(), kRun),
          &steps);
  ASSERT_TRUE(o.ok) << o.error;
  check_run(o, steps, false, 0, 4);
  EXPECT_GT(o.counters.filtered, 5u);
  EXPECT_GT(o.counters.admitted, 20u);
}

// A stage that drops every item (a filter nothing passes) would have the driver admit new work
// for ever, without a step or a word: past run.maxOverSampling x batchSize items dropped since
// the last step the run ends, naming the actor that dropped and the counts, in sync and async.
TEST_F(Driver, OverSamplingIsBoundedAndNamesTheActorThatDropped) {
  const std::string drop_all =
      ", replicas = 2, params = (custom = [(name = \"drop_every\", value = (int = 1))])";
  for (const auto& schedule : {sync_schedule(), async_schedule(1, false)}) {
    for (uint32_t times : {2u, 8u}) {
      std::filesystem::remove_all(dir_ / "run");
      const auto start = std::chrono::steady_clock::now();
      auto o = run(testing::toy_graph(drop_all, schedule,
                                      "(steps = 5, batchSize = 4, deadlineSeconds = 10, "
                                      "maxOverSampling = " +
                                          std::to_string(times) + ")"));
      EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
      ASSERT_FALSE(o.ok) << schedule;
      const std::string dropped = std::to_string(times * 4 + 1);
      EXPECT_NE(o.error.find("step 1 of 5: " + dropped + " of the "), std::string::npos) << o.error;
      EXPECT_NE(o.error.find("items admitted since step 0 were dropped on the way to the learner "
                             "(actor 'stage' (kind toy_stage) dropped " +
                             dropped + "), more than run.maxOverSampling x run.batchSize = " +
                             std::to_string(times) + " x 4; the learner's buffer holds 0 of the 4"),
                std::string::npos)
          << o.error;
      EXPECT_EQ(o.counters.filtered, times * 4 + 1);
    }
  }
}

TEST_F(Driver, SourceRunningOutEndsTheRunWithANote) {
  auto o = run(testing::toy_graph("", sync_schedule(), kRun), nullptr, false, {"src.limit=9"});
  ASSERT_TRUE(o.ok) << o.error;
  EXPECT_EQ(o.steps, 2u);
  EXPECT_EQ(o.note, "the source 'src' ran out of items after 2 of 5 steps");
}

// A stalled actor of each role: the error names the waiting actor, the awaited one, the message.
TEST_F(Driver, DeadlineOfAStalledSource) {
  auto o = run(testing::toy_graph("", sync_schedule(), "(steps = 5, batchSize = 4)"), nullptr,
               false, {"src.stall_after=4", "src.deadlineSeconds=0.25"});
  ASSERT_FALSE(o.ok);
  EXPECT_EQ(o.error,
            "deadline of 0.25 s passed: the driver, admitting 4 new items, waited for actor 'src' "
            "(replica 0, kind toy_source) to answer 'produce 4'");
}

TEST_F(Driver, DeadlineOfAStalledStage) {
  auto o = run(testing::toy_graph("", sync_schedule(), "(steps = 5, batchSize = 4)"), nullptr,
               false, {"stage.stall_after=2", "stage.deadlineSeconds=0.25"});
  ASSERT_FALSE(o.ok);
  EXPECT_EQ(o.error,
            "deadline of 0.25 s passed: the driver, routing src.items -> stage.items (item 3), "
            "waited for actor 'stage' (replica 0, kind toy_stage) to answer 'process items'");
}

TEST_F(Driver, DeadlineOfAStalledLearner) {
  auto o = run(testing::toy_graph("", sync_schedule(), "(steps = 5, batchSize = 4)"), nullptr,
               false, {"learner.stall_at_step=2", "learner.deadlineSeconds=0.25"});
  ASSERT_FALSE(o.ok);
  EXPECT_EQ(o.error,
            "deadline of 0.25 s passed: the driver waited for actor 'learner' (replica 0, kind "
            "toy_learner) to answer 'train step 2 (4 items)'");
}

TEST_F(Driver, ADeadActorFailsTheRunWithItsError) {
  auto o =
      run(testing::toy_graph("", sync_schedule(), kRun), nullptr, false, {"stage.die_after=3"});
  ASSERT_FALSE(o.ok);
  EXPECT_NE(o.error.find("actor 'stage' (replica 0, kind toy_stage) died: "), std::string::npos)
      << o.error;
  EXPECT_NE(o.error.find("toy_stage told to die after 3 items"), std::string::npos) << o.error;
}

TEST_F(Driver, ADeadLearnerFailsTheRun) {
  auto o =
      run(testing::toy_graph("", sync_schedule(), kRun), nullptr, false, {"learner.die_at_step=3"});
  ASSERT_FALSE(o.ok);
  EXPECT_NE(o.error.find("actor 'learner' (replica 0, kind toy_learner) died: "), std::string::npos)
      << o.error;
}

TEST_F(Driver, ARestartableActorIsRestartedAndNothingIsLost) {
  auto fields = testing::toy_graph(", replicas = 2", sync_schedule(), kRun);
  fields.replace(fields.find("\"toy_stage\""), 11, "\"toy_flaky_stage\"");
  records steps;
  auto o = run(fields, &steps, false, {"stage.die_after=3"});
  ASSERT_TRUE(o.ok) << o.error;
  EXPECT_EQ(o.counters.restarts, 2u);  // each replica dies once
  std::set<uint64_t> trained;
  check_run(o, steps, false, 0, 4, &trained);
  EXPECT_EQ(trained.size(), 20u);
}

TEST_F(Driver, SyncResumeContinuesBitwise) {
  const std::string run6 = "(steps = 6, batchSize = 3, checkpointInterval = 2)";
  records full;
  auto a = run(testing::toy_graph(", replicas = 2", sync_schedule(), run6), &full);
  ASSERT_TRUE(a.ok) << a.error;
  std::filesystem::remove_all(dir_ / "run");

  records first, second;
  auto b = run(testing::toy_graph(", replicas = 2", sync_schedule(), run6), &first, false,
               {"run.steps=4"});
  ASSERT_TRUE(b.ok) << b.error;
  ASSERT_TRUE(std::filesystem::exists(dir_ / "run" / "checkpoints" / "step-4" / "manifest.json"));
  auto c = run(testing::toy_graph(", replicas = 2", sync_schedule(), run6), &second, true);
  ASSERT_TRUE(c.ok) << c.error;
  ASSERT_EQ(second.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(second[i].step, full[4 + i].step);
    EXPECT_EQ(second[i].version, full[4 + i].version);
    EXPECT_EQ(second[i].batch_origins, full[4 + i].batch_origins);
    EXPECT_EQ(second[i].metrics, full[4 + i].metrics);
    EXPECT_EQ(second[i].staleness, full[4 + i].staleness);
  }
}

// With a buffer actor in the graph, the driver puts every item into it and takes the learner's
// batches from it: the same lockstep run, item for item, as with the driver's own queue; in
// async the bound holds; the buffer's answers are the counters' (buffered at the end).
TEST_F(Driver, ABufferActorHoldsTheLearnersItems) {
  records plain, buffered;
  auto a = run(testing::toy_graph(", replicas = 3", sync_schedule(), kRun), &plain);
  ASSERT_TRUE(a.ok) << a.error;
  std::filesystem::remove_all(dir_ / "run");
  auto b = run(buffered_toy_graph(", replicas = 3", "", sync_schedule(), kRun), &buffered);
  ASSERT_TRUE(b.ok) << b.error;
  ASSERT_EQ(buffered.size(), plain.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(buffered[i].batch_origins, plain[i].batch_origins) << "step " << i + 1;
    EXPECT_EQ(buffered[i].metrics.at("total"), plain[i].metrics.at("total")) << "step " << i + 1;
  }
  check_run(b, buffered, false, 0, 4);
  EXPECT_EQ(b.counters.admitted, a.counters.admitted);
  for (int s : {0, 2}) {
    for (bool drop : {false, true}) {
      std::filesystem::remove_all(dir_ / "run");
      records steps;
      // With onStale = drop the driver has the buffer drop what went stale while it waited (the
      // toy buffer has no staleness rule of its own here), as the queue would.
      auto o =
          run(buffered_toy_graph(
                  ", replicas = 2, params = (custom = [(name = \"delay_ms\", value = (int = 1))])",
                  "", async_schedule(s, drop), kRun),
              &steps);
      ASSERT_TRUE(o.ok) << o.error;
      EXPECT_EQ(o.steps, 5u);
      check_run(o, steps, true, s, 4);
    }
  }
}

TEST_F(Driver, ABufferThatServesNoBatchFailsTheRunNamingIt) {
  auto o = run(
      buffered_toy_graph("", ", params = (custom = [(name = \"refuse\", value = (bool = true))])",
                         sync_schedule(), kRun));
  EXPECT_FALSE(o.ok);
  EXPECT_NE(o.error.find("actor 'buf' (kind toy_buffer) holds 4 items but served none of the 4 the "
                         "learner asked for"),
            std::string::npos)
      << o.error;
}

TEST_F(Driver, ABufferedRunResumesBitwise) {
  const std::string run6 = "(steps = 6, batchSize = 3, checkpointInterval = 2)";
  records full;
  auto a = run(buffered_toy_graph(", replicas = 2", "", sync_schedule(), run6), &full);
  ASSERT_TRUE(a.ok) << a.error;
  std::filesystem::remove_all(dir_ / "run");
  records first, second;
  auto b = run(buffered_toy_graph(", replicas = 2", "", sync_schedule(), run6), &first, false,
               {"run.steps=4"});
  ASSERT_TRUE(b.ok) << b.error;
  ASSERT_TRUE(std::filesystem::exists(dir_ / "run" / "checkpoints" / "step-4" / "buf-0.state"));
  // The same checkpoint resumed by a graph without the buffer is refused: its items would be lost.
  auto without = run(testing::toy_graph(", replicas = 2", sync_schedule(), run6), nullptr, true);
  EXPECT_FALSE(without.ok);
  EXPECT_NE(without.error.find(
                "the checkpoint was made by a graph with a buffer actor, this one has none"),
            std::string::npos)
      << without.error;
  auto c = run(buffered_toy_graph(", replicas = 2", "", sync_schedule(), run6), &second, true);
  ASSERT_TRUE(c.ok) << c.error;
  ASSERT_EQ(second.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(second[i].batch_origins, full[4 + i].batch_origins);
    EXPECT_EQ(second[i].metrics, full[4 + i].metrics);
  }
}

// A second learner trains every step on its items of the policy learner's batch: the same items
// (their sums agree step by step, also when a filter drops some and in async), the run's version
// is the policy's, and a resumed run repeats an uninterrupted one.
TEST_F(Driver, ASecondLearnerTrainsOnThePolicysItemsEachStep) {
  const std::string filtered =
      ", replicas = 2, params = (custom = [(name = \"drop_every\", value = (int = 3))])";
  // A slow policy learner: in async the stage runs ahead and the buffer holds more than a batch,
  // of which the second learner must get the same items as the policy.
  const std::string slow = ", params = (custom = [(name = \"delay_ms\", value = (int = 20))])";
  for (const auto& schedule : {sync_schedule(), async_schedule(1, false), async_schedule(1, true),
                               async_schedule(2, false)}) {
    std::filesystem::remove_all(dir_ / "run");
    records steps;
    auto o = run(two_learner_graph(filtered, schedule, kRun, slow), &steps);
    ASSERT_TRUE(o.ok) << o.error;
    ASSERT_EQ(steps.size(), 5u);
    check_run(o, steps, schedule != sync_schedule(), schedule == async_schedule(2, false) ? 2 : 1,
              4);
    for (const auto& r : steps) {
      EXPECT_EQ(r.metrics.at("aux_batch_sum"), r.metrics.at("batch_sum"))
          << schedule << " step " << r.step;
      EXPECT_EQ(r.metrics.at("aux_batch_items"), 4.0) << schedule << " step " << r.step;
      EXPECT_EQ(r.version, r.step);
    }
    EXPECT_EQ(steps.back().metrics.at("aux_total"), steps.back().metrics.at("total"));
  }
  // Across a checkpoint and resume (the second learner's state and its waiting items in it).
  const std::string run6 = "(steps = 6, batchSize = 3, checkpointInterval = 2)";
  std::filesystem::remove_all(dir_ / "run");
  records full, first, second;
  ASSERT_TRUE(run(two_learner_graph(filtered, sync_schedule(), run6), &full).ok);
  std::filesystem::remove_all(dir_ / "run");
  ASSERT_TRUE(
      run(two_learner_graph(filtered, sync_schedule(), run6), &first, false, {"run.steps=4"}).ok);
  auto c = run(two_learner_graph(filtered, sync_schedule(), run6), &second, true);
  ASSERT_TRUE(c.ok) << c.error;
  ASSERT_EQ(second.size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(second[i].metrics, full[4 + i].metrics);
}

/// Two toy sources mixed 70/30 (`b_extra` adds to b's spec) into the toy stage and learner.
std::string mix_graph(const std::string& b_extra, const std::string& schedule,
                      const std::string& run) {
  return R"(name = "mix",
  actors = [(name = "a", kind = "toy_source", weight = 0.7),
            (name = "b", kind = "toy_source", weight = 0.3)" +
         b_extra + R"(),
            (name = "stage", kind = "toy_stage", replicas = 2),
            (name = "learner", kind = "toy_learner")],
  edges = [(from = "a.items", to = "stage.items"), (from = "b.items", to = "stage.items"),
           (from = "stage.items", to = "learner.items"),
           (from = "learner.weights", to = "stage.weights")],
  schedule = )" +
         schedule + ",\n  run = " + run;
}

using per_source = std::map<std::string, uint64_t>;

TEST_F(Driver, SourcesMixByWeight) {
  // 70/30 in lockstep batches of 10: every batch holds 7 of a's items and 3 of b's.
  records steps;
  auto o = run(mix_graph("", sync_schedule(), "(steps = 5, batchSize = 10)"), &steps);
  ASSERT_TRUE(o.ok) << o.error;
  ASSERT_EQ(steps.size(), 5u);
  check_run(o, steps, false, 0, 10);
  for (const auto& r : steps)
    EXPECT_EQ(r.batch_sources, (per_source{{"a", 7}, {"b", 3}})) << "step " << r.step;
  std::filesystem::remove_all(dir_ / "run");

  // b holds 6 items: it runs out in step 3 and leaves the mix; a fills the batches from then on.
  records out;
  auto p = run(mix_graph(", params = (custom = [(name = \"limit\", value = (int = 6))])",
                         sync_schedule(), "(steps = 5, batchSize = 10)"),
               &out);
  ASSERT_TRUE(p.ok) << p.error;
  ASSERT_EQ(out.size(), 5u);
  check_run(p, out, false, 0, 10);
  EXPECT_EQ(out[0].batch_sources, (per_source{{"a", 7}, {"b", 3}}));
  EXPECT_EQ(out[1].batch_sources, (per_source{{"a", 7}, {"b", 3}}));
  for (size_t i = 2; i < 5; ++i)
    EXPECT_EQ(out[i].batch_sources, (per_source{{"a", 10}})) << "step " << i + 1;
  std::filesystem::remove_all(dir_ / "run");

  // Both run out: the run ends early, naming them.
  auto q = run(mix_graph(", params = (custom = [(name = \"limit\", value = (int = 6))])",
                         sync_schedule(), "(steps = 5, batchSize = 10)"),
               nullptr, false, {"a.limit=14"});
  ASSERT_TRUE(q.ok) << q.error;
  EXPECT_EQ(q.steps, 2u);
  EXPECT_NE(q.note.find("the sources 'a', 'b' ran out of items after 2 of 5 steps"),
            std::string::npos)
      << q.note;
}

TEST_F(Driver, MixedSourcesResumeBitwise) {
  // Batches of 3 at 70/30 leave the round robin's credit between steps: the checkpoint keeps it
  // (started afresh, steps 5 and 6 would take 2 and 2 of a's items instead of 2 and 3).
  const std::string run6 = "(steps = 6, batchSize = 3, checkpointInterval = 2)";
  records full;
  auto a = run(mix_graph("", sync_schedule(), run6), &full);
  ASSERT_TRUE(a.ok) << a.error;
  per_source total;
  for (const auto& r : full)
    for (const auto& [k, v] : r.batch_sources) total[k] += v;
  // 18 items: 12.6 / 5.4, each to within one item.
  EXPECT_EQ(total["a"] + total["b"], 18u);
  EXPECT_GE(total["a"], 12u);
  EXPECT_LE(total["a"], 13u);
  std::filesystem::remove_all(dir_ / "run");
  records first, second;
  auto b = run(mix_graph("", sync_schedule(), run6), &first, false, {"run.steps=4"});
  ASSERT_TRUE(b.ok) << b.error;
  auto c = run(mix_graph("", sync_schedule(), run6), &second, true);
  ASSERT_TRUE(c.ok) << c.error;
  ASSERT_EQ(second.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(second[i].batch_origins, full[4 + i].batch_origins);
    EXPECT_EQ(second[i].batch_sources, full[4 + i].batch_sources);
    EXPECT_EQ(second[i].metrics, full[4 + i].metrics);
  }
}

TEST_F(Driver, AsyncResumeLosesAndDuplicatesNothing) {
  const std::string run8 = "(steps = 8, batchSize = 3, checkpointInterval = 3)";
  records first, second;
  auto b = run(testing::toy_graph(", replicas = 2", async_schedule(1, false), run8), &first, false,
               {"run.steps=5"});
  ASSERT_TRUE(b.ok) << b.error;
  // The newest checkpoint is step 3: steps 4 and 5 of the first run are redone after resuming.
  std::filesystem::remove_all(dir_ / "run" / "checkpoints" / "step-5");
  auto c = run(testing::toy_graph(", replicas = 2", async_schedule(1, false), run8), &second, true);
  ASSERT_TRUE(c.ok) << c.error;
  EXPECT_EQ(second.front().step, 4u);
  EXPECT_EQ(c.steps, 8u);
  std::set<uint64_t> trained;
  records kept(first.begin(), first.begin() + 3);
  check_run(b, kept, true, 1, 3, &trained);
  check_run(c, second, true, 1, 3, &trained);
  EXPECT_EQ(trained.size(), 24u);
}

TEST_F(Driver, ResumeWithoutACheckpointIsRefused) {
  auto o = run(testing::toy_graph("", sync_schedule(), kRun), nullptr, true);
  ASSERT_FALSE(o.ok);
  EXPECT_EQ(o.error, "cannot resume: no complete checkpoint under " +
                         (dir_ / "run" / "checkpoints").string());
}

// -- Backpressure: a full edge holds upstream work ---------------------------------------------

/// Keeps, per edge ("from -> to") and for the learner's buffer ("buffer"), the most work it held
/// (queued and in flight) at any report of the driver's live view.
struct fill_log {
  std::mutex m;
  std::map<std::string, uint64_t> most;
  void record(const live_view& v, const std::string& learner) {
    std::lock_guard<std::mutex> lock(m);
    for (const auto& e : v.edges) {
      auto& x = most[e.from + " -> " + e.to];
      x = std::max(x, e.queued + e.in_flight);
    }
    for (const auto& a : v.actors) {
      if (a.name == learner) most["buffer"] = std::max(most["buffer"], a.queued);
    }
  }
};

/// The toy graph with capacities on its two work edges (0: the schedule's window).
std::string capped_toy_graph(const std::string& stage_extra, const std::string& learner_extra,
                             const std::string& schedule, const std::string& run, int to_stage,
                             int to_learner) {
  auto f = testing::toy_graph(stage_extra, schedule, run);
  auto cap = [&](const std::string& to, int c) {
    f.replace(f.find(to + ")"), to.size() + 1, to + ", capacity = " + std::to_string(c) + ")");
  };
  cap("to = \"stage.items\"", to_stage);
  cap("to = \"learner.items\"", to_learner);
  f.replace(f.find("\"toy_learner\")"), 14, "\"toy_learner\"" + learner_extra + ")");
  return f;
}

// A fast source, a slow stage and a slower learner under a loose staleness bound (a window of 8
// items): the edge into the stage (capacity 1) and the learner's buffer (capacity 2) never hold
// more than their capacity, the work beyond it waits at the source, and every admitted item is
// trained or still buffered.
TEST_F(Driver, FullEdgesHoldUpstreamWork) {
  auto g = load("bp.capnp", capped_toy_graph(
                                ", params = (custom = [(name = \"delay_ms\", value = (int = 3))])",
                                ", params = (custom = [(name = \"delay_ms\", value = (int = 25))])",
                                async_schedule(3, false), "(steps = 6, batchSize = 2)", 1, 2));
  ASSERT_TRUE(g);
  auto errors = graph::validate_kinds(*g, kinds_);
  ASSERT_TRUE(errors.empty()) << errors[0].text();
  caf::actor_system_config cfg;
  cfg.add_message_types<caf::id_block::milesrt_runtime>();
  caf::actor_system sys{cfg};
  fill_log fill;
  records steps;
  std::promise<run_outcome> done;
  driver_options opts;
  opts.live_interval = std::chrono::milliseconds(0);
  opts.on_live = [&](const live_view& v) { fill.record(v, "learner"); };
  opts.on_step = [&](const step_record& r) { steps.push_back(r); };
  opts.on_finish = [&](const run_outcome& o) { done.set_value(o); };
  spawn_driver(sys, build_plan(sys, *g, kinds_, dir_ / "run", nullptr), opts);
  auto o = done.get_future().get();
  ASSERT_TRUE(o.ok) << o.error;
  EXPECT_EQ(o.steps, 6u);
  check_run(o, steps, true, 3, 2);
  // Full, never over: the bound was reached and held.
  EXPECT_EQ(fill.most["src.items -> stage.items"], 1u);
  EXPECT_EQ(fill.most["buffer"], 2u);
}

TEST_F(Schedules, ThousandRandomDeliveryOrdersKeepEveryProperty) {
  std::mt19937 rng(20261202);
  const int kSchedules = 2000;
  size_t stale_items = 0, dropped = 0, aux_steps = 0;
  for (int i = 0; i < kSchedules && !HasFailure(); ++i) {
    auto c = random_case(rng);
    auto g = load("s" + std::to_string(i) + ".capnp", fields(c, c.steps, 0));
    ASSERT_TRUE(g);
    records steps;
    auto o = run_random(*g, rng, steps, dir_ / ("run" + std::to_string(i)), false);
    SCOPED_TRACE("schedule " + std::to_string(i) + (c.async ? " async" : " sync") +
                 (c.drop ? " drop" : "") + " s=" + std::to_string(c.staleness) +
                 " batch=" + std::to_string(c.batch) + " replicas=" + std::to_string(c.replicas));
    ASSERT_TRUE(o.ok) << o.error;
    ASSERT_EQ(o.steps, uint64_t(c.steps));
    check_run(o, steps, c.async, c.staleness, c.batch);
    for (const auto& r : steps) {
      for (const auto& [staleness, n] : r.staleness) stale_items += staleness > 0 ? n : 0;
      // A second learner trains on the policy's items, step by step.
      if (c.aux && !c.buffer) {
        EXPECT_EQ(r.metrics.at("aux_batch_sum"), r.metrics.at("batch_sum")) << "step " << r.step;
        EXPECT_EQ(r.metrics.at("aux_batch_items"), double(c.batch)) << "step " << r.step;
        aux_steps++;
      }
    }
    dropped += o.counters.dropped_stale;
  }
  // The async runs really ran ahead of the learner, and `drop` really dropped.
  EXPECT_GT(stale_items, 100u);
  EXPECT_GT(dropped, 10u);
  EXPECT_GT(aux_steps, 1000u);
  EXPECT_GT(jobs_, 50000u);
}

TEST_F(Schedules, AStepsMetricMeanHasTheSameBitsInEveryDeliveryOrder) {
  // Each reply of three stage replicas brings 1/(value + 1): summed in arrival order, the step's
  // mean would differ in its last bits from one delivery order to another.
  std::mt19937 rng(11);
  std::vector<double> first;
  for (int i = 0; i < 40 && !HasFailure(); ++i) {
    const std::string stage =
        ", replicas = 3, params = (custom = [(name = \"value_metric\", value = (bool = true))])";
    auto g = load("m" + std::to_string(i) + ".capnp",
                  testing::toy_graph(stage, sync_schedule(), "(steps = 4, batchSize = 7)"));
    ASSERT_TRUE(g);
    records steps;
    auto o = run_random(*g, rng, steps, dir_ / ("run" + std::to_string(i)), false);
    ASSERT_TRUE(o.ok) << o.error;
    std::vector<double> means;
    for (const auto& r : steps) means.push_back(r.metrics.at("item_inverse"));
    if (first.empty()) first = means;
    for (size_t k = 0; k < means.size(); ++k)
      EXPECT_EQ(means[k], first[k]) << "order " << i << " step " << k + 1;
  }
}

TEST_F(Schedules, RandomOrdersAcrossACheckpointAndResume) {
  std::mt19937 rng(7);
  for (int i = 0; i < 200 && !HasFailure(); ++i) {
    auto c = random_case(rng);
    const int total = c.steps + 3, interval = 2;
    auto run_dir = dir_ / ("run" + std::to_string(i));
    // First part: stop after `interval` + 1 steps; the checkpoint at `interval` is the newest.
    auto g1 = load("a" + std::to_string(i) + ".capnp", fields(c, interval + 1, interval));
    records first, second;
    auto o1 = run_random(*g1, rng, first, run_dir, false);
    ASSERT_TRUE(o1.ok) << o1.error;
    auto g2 = load("b" + std::to_string(i) + ".capnp", fields(c, total, interval));
    auto o2 = run_random(*g2, rng, second, run_dir, true);
    ASSERT_TRUE(o2.ok) << o2.error;
    ASSERT_EQ(o2.steps, uint64_t(total));
    ASSERT_EQ(second.front().step, uint64_t(interval + 1));
    std::set<uint64_t> trained;
    records kept(first.begin(), first.begin() + interval);
    check_run(o1, kept, c.async, c.staleness, c.batch, &trained);
    check_run(o2, second, c.async, c.staleness, c.batch, &trained);
    EXPECT_EQ(trained.size(), size_t(total * c.batch));
    // Across the resume, every item accepted was trained or is still held: nothing the buffer
    // held at the checkpoint was lost.
    EXPECT_EQ(o2.counters.accepted,
              uint64_t(total * c.batch) + o2.counters.buffered + o2.counters.surplus);
  }
}

// Random capacities on both work edges (the learner's from the batch size up, 0 for the default)
// under random delivery orders, across a checkpoint and a resume: no edge and no buffer ever holds
// more than its capacity, the bounds are reached, and nothing is lost or trained twice.
TEST_F(Schedules, FullEdgesHoldWorkUnderRandomOrders) {
  std::mt19937 rng(16);
  std::map<std::string, uint64_t> reached;  // how often an edge or buffer was full
  for (int i = 0; i < 300 && !HasFailure(); ++i) {
    auto c = random_case(rng);
    auto in = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    const int to_stage = in(0, 3), to_learner = in(0, 1) ? 0 : c.batch + in(0, 2);
    const uint64_t window = uint64_t(c.batch) * (c.async ? c.staleness + 1 : 1);
    const uint64_t stage_cap = to_stage ? to_stage : window,
                   buffer_cap = to_learner ? to_learner : window;
    SCOPED_TRACE("case " + std::to_string(i) + (c.async ? " async" : " sync") +
                 (c.drop ? " drop" : "") + " s=" + std::to_string(c.staleness) +
                 " batch=" + std::to_string(c.batch) + " replicas=" + std::to_string(c.replicas) +
                 " capacities " + std::to_string(to_stage) + ", " + std::to_string(to_learner));
    auto graph_of = [&](int steps, const std::string& name) {
      schedule_case plain = c;
      plain.capacity = 0;
      auto f = fields(plain, steps, 2);
      // With a buffer actor, the edge into it bounds what the learner's items take.
      const std::string feed = c.buffer ? "to = \"buf.items\"" : "to = \"learner.items\"";
      for (auto [to, cap] : {std::pair<std::string, int>{"to = \"stage.items\"", to_stage},
                             std::pair<std::string, int>{feed, to_learner}}) {
        f.replace(f.find(to + ")"), to.size() + 1,
                  to + ", capacity = " + std::to_string(cap) + ")");
      }
      return load(name, f);
    };
    auto check = [&](const live_view& v) {
      for (const auto& e : v.edges) {
        if (e.to != "stage.items") continue;
        EXPECT_LE(e.queued + e.in_flight, stage_cap) << "edge " << e.from << " -> " << e.to;
        if (e.queued + e.in_flight == stage_cap) reached["edge"]++;
      }
      for (const auto& a : v.actors) {
        if (a.name != (c.buffer ? "buf" : "learner")) continue;
        EXPECT_LE(a.queued, buffer_cap) << "the learner's buffer";
        if (a.queued == buffer_cap) reached["buffer"]++;
      }
    };
    const int total = c.steps + 3;
    auto run_dir = dir_ / ("bp" + std::to_string(i));
    auto g1 = graph_of(3, "bp" + std::to_string(i) + "a.capnp");
    auto g2 = graph_of(total, "bp" + std::to_string(i) + "b.capnp");
    ASSERT_TRUE(g1 && g2);
    records first, second;
    auto o1 = run_random(*g1, rng, first, run_dir, false, check);
    ASSERT_TRUE(o1.ok) << o1.error;
    auto o2 = run_random(*g2, rng, second, run_dir, true, check);
    ASSERT_TRUE(o2.ok) << o2.error;
    std::set<uint64_t> trained;
    records kept(first.begin(), first.begin() + 2);
    check_run(o1, kept, c.async, c.staleness, c.batch, &trained);
    check_run(o2, second, c.async, c.staleness, c.batch, &trained);
    EXPECT_EQ(trained.size(), size_t(total * c.batch));
    // Across the resume, every item accepted was trained or is still held: nothing the buffer
    // held at the checkpoint was lost.
    EXPECT_EQ(o2.counters.accepted,
              uint64_t(total * c.batch) + o2.counters.buffered + o2.counters.surplus);
  }
  EXPECT_GT(reached["edge"], 100u);
  EXPECT_GT(reached["buffer"], 100u);
}

// A restartable stage killed at random messages (work items, publications, snapshots, restores),
// under random delivery orders, across a checkpoint and a resume: every dead replica is replaced,
// its replacement holds the newest version before its first item (sync runs stay at staleness 0,
// async ones within the bound), the work it held is sent again and counted, and every admitted
// item is trained at most once and accounted for.
TEST_F(Schedules, RandomKillsOfARestartableStageLoseAndRepeatNothing) {
  std::mt19937 rng(19);
  uint64_t restarts = 0, requeued = 0;
  for (int i = 0; i < 300 && !HasFailure(); ++i) {
    auto c = random_case(rng);
    const int per_mille = std::uniform_int_distribution<int>(20, 150)(rng);
    auto mortal = [&](std::string f) {
      f.replace(f.find("\"toy_stage\""), 11, "\"toy_mortal_stage\"");
      f.replace(f.find("checkpointInterval"), 18, kUnlimitedRestarts + "checkpointInterval");
      const std::string drop = "value = (int = " + std::to_string(c.drop_every) + "))";
      f.replace(
          f.find(drop), drop.size(),
          drop + ", (name = \"die_per_mille\", value = (int = " + std::to_string(per_mille) + "))");
      return f;
    };
    const int total = c.steps + 3, interval = 2;
    auto run_dir = dir_ / ("mortal" + std::to_string(i));
    SCOPED_TRACE("case " + std::to_string(i) + (c.async ? " async" : " sync") +
                 (c.drop ? " drop" : "") + " s=" + std::to_string(c.staleness) +
                 " batch=" + std::to_string(c.batch) + " replicas=" + std::to_string(c.replicas) +
                 " die=" + std::to_string(per_mille) + "/1000");
    auto g1 = load("m" + std::to_string(i) + "a.capnp", mortal(fields(c, interval + 1, interval)));
    ASSERT_TRUE(g1);
    records first, second;
    auto o1 = run_random(*g1, rng, first, run_dir, false);
    ASSERT_TRUE(o1.ok) << o1.error;
    auto g2 = load("m" + std::to_string(i) + "b.capnp", mortal(fields(c, total, interval)));
    auto o2 = run_random(*g2, rng, second, run_dir, true);
    ASSERT_TRUE(o2.ok) << o2.error;
    ASSERT_EQ(o2.steps, uint64_t(total));
    check_run(o1, first, c.async, c.staleness, c.batch);
    // The resumed run trains what the checkpoint had not, each item once.
    std::set<uint64_t> trained;
    check_run(o2, second, c.async, c.staleness, c.batch, &trained);
    for (size_t k = 0; k < size_t(interval); ++k)
      for (auto origin : first[k].batch_origins)
        EXPECT_TRUE(trained.insert(origin).second) << "item " << origin;
    EXPECT_EQ(trained.size(), size_t(total * c.batch));
    // Across the resume, every item accepted was trained or is still held: nothing the buffer
    // held at the checkpoint was lost.
    EXPECT_EQ(o2.counters.accepted,
              uint64_t(total * c.batch) + o2.counters.buffered + o2.counters.surplus);
    restarts += o1.counters.restarts + o2.counters.restarts;
    requeued += o2.counters.requeued;
  }
  // The kills really happened, and some of them held work.
  EXPECT_GT(restarts, 200u);
  EXPECT_GT(requeued, 50u);
}

// A run directory that cannot take a file is reported with the reason (here a file-size limit, as
// a full disk gives "No space left on device"), not a bare "not writable".
TEST(RunDirectory, AFailedWriteNamesItsCause) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("milesrt-unwritable-" + std::to_string(::getpid()));
  EXPECT_EQ(unwritable_dir(dir), "");
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* const old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit none = old;
  none.rlim_cur = 0;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &none), 0);
  const std::string problem = unwritable_dir(dir);
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(problem, "run directory " + dir.string() +
                         ": cannot write a file there: " + std::strerror(EFBIG));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace milesrt::runtime
