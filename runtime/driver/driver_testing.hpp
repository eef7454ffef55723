#pragma once
// What the driver's tests share: toy graphs, the properties every run keeps, fixtures that run a
// graph (`Driver`) or run it under random delivery orders (`Schedules`).

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <fstream>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/driver/driver.hpp"
#include "runtime/driver/run.hpp"
#include "runtime/graph/check_kinds.hpp"
#include "runtime/graph/overrides.hpp"
#include "runtime/graph/validate.hpp"
#include "runtime/testing/scratch_graph.hpp"

// Not in an unnamed namespace: the fixtures are one class each across the test files.
namespace milesrt::runtime::driver_testing {

using records = std::vector<step_record>;

inline std::string sync_schedule() { return "(sync = void)"; }
inline std::string async_schedule(int s, bool drop) {
  return "(async = (maxStaleness = " + std::to_string(s) +
         ", onStale = " + (drop ? "drop" : "wait") + "))";
}

/// Checks what must hold for every run: trained items are never duplicated, the staleness bound
/// holds, and every admitted item is accounted for.
inline void check_run(const run_outcome& o, const records& steps, bool async,
                      uint64_t max_staleness, uint64_t batch,
                      std::set<uint64_t>* trained = nullptr) {
  std::set<uint64_t> local;
  if (trained == nullptr) trained = &local;
  for (const auto& r : steps) {
    EXPECT_EQ(r.batch_origins.size(), batch) << "step " << r.step;
    for (auto origin : r.batch_origins) {
      EXPECT_TRUE(trained->insert(origin).second) << "item " << origin << " trained twice";
    }
    for (const auto& [staleness, n] : r.staleness) {
      if (async) {
        EXPECT_LE(staleness, max_staleness) << "step " << r.step;
      } else {
        EXPECT_EQ(staleness, 0u) << "step " << r.step;
      }
    }
  }
  const auto& c = o.counters;
  EXPECT_EQ(c.stale_violations, 0u);
  EXPECT_EQ(c.in_flight, 0u);
  EXPECT_EQ(c.admitted, c.accepted + c.dropped_stale + c.filtered)
      << "accepted " << c.accepted << ", dropped_stale " << c.dropped_stale << ", filtered "
      << c.filtered << ", buffered " << c.buffered << ", surplus " << c.surplus;
  if (trained == &local) {
    EXPECT_EQ(c.accepted, steps.size() * batch + c.buffered + c.surplus);
  }
}

class Driver : public testing::scratch_test {
 protected:
  run_outcome run(const std::string& fields, records* steps = nullptr, bool resume = false,
                  const std::vector<std::string>& sets = {}) {
    auto g = load("g" + std::to_string(++graphs_) + ".capnp", fields);
    if (!g) return {};
    for (const auto& s : sets) {
      auto d = graph::apply_override(*g, kinds_, s);
      EXPECT_FALSE(d) << d->text();
    }
    auto errors = graph::validate_structure(*g);
    auto more = graph::validate_kinds(*g, kinds_);
    errors.insert(errors.end(), more.begin(), more.end());
    EXPECT_TRUE(errors.empty()) << errors[0].text();
    caf::actor_system_config cfg;
    cfg.add_message_types<caf::id_block::milesrt_runtime>();
    caf::actor_system sys{cfg};
    run_request req;
    req.run_dir = dir_ / "run";
    req.resume = resume;
    req.progress = nullptr;
    req.on_step = [steps](const step_record& r) {
      if (steps) steps->push_back(r);
    };
    return run_graph(sys, *g, kinds_, req);
  }
  int graphs_ = 0;
};

const std::string kRun = "(steps = 5, batchSize = 4, deadlineSeconds = 10)";

/// A toy graph's fields with a toy_buffer actor ("buf") put between the stage and the learner
/// (`buffer_extra` adds to the buffer's spec).
inline std::string with_buffer(std::string f, const std::string& buffer_extra) {
  const std::string learner = "(name = \"learner\", kind = \"toy_learner\")";
  f.replace(f.find(learner), learner.size(),
            "(name = \"buf\", kind = \"toy_buffer\"" + buffer_extra + "),\n" + learner);
  const std::string edge = "(from = \"stage.items\", to = \"learner.items\")";
  f.replace(f.find(edge), edge.size(),
            "(from = \"stage.items\", to = \"buf.items\"), (from = \"buf.items\", to = "
            "\"learner.items\")");
  return f;
}

/// The toy graph with a toy_buffer actor between the stage and the learner.
inline std::string buffered_toy_graph(const std::string& stage_extra,
                                      const std::string& buffer_extra, const std::string& schedule,
                                      const std::string& run) {
  return with_buffer(testing::toy_graph(stage_extra, schedule, run), buffer_extra);
}

/// A toy graph's fields with a second learner ("aux", metrics prefixed "aux_") fed by the stage
/// beside the policy learner, listed after it (`learner_extra` adds to the policy learner's spec).
inline std::string with_second_learner(std::string f, const std::string& learner_extra = "") {
  const std::string learner = "(name = \"learner\", kind = \"toy_learner\")";
  f.replace(f.find(learner), learner.size(),
            "(name = \"learner\", kind = \"toy_learner\"" + learner_extra +
                "),\n(name = \"aux\", kind = \"toy_learner\", params = (custom = [(name = "
                "\"prefix\", value = (text = \"aux_\"))]))");
  const std::string edge = "(from = \"stage.items\", to = \"learner.items\")";
  f.replace(f.find(edge), edge.size(), edge + ", (from = \"stage.items\", to = \"aux.items\")");
  return f;
}

inline std::string two_learner_graph(const std::string& stage_extra, const std::string& schedule,
                                     const std::string& run,
                                     const std::string& learner_extra = "") {
  return with_second_learner(testing::toy_graph(stage_extra, schedule, run), learner_extra);
}

// -- The schedule properties under random delivery orders -------------------------------------

struct schedule_case {
  bool async = false;
  bool drop = false;
  int staleness = 0;
  int batch = 2;
  int replicas = 1;
  int steps = 3;
  int drop_every = 0;
  int capacity = 0;
  bool buffer = false;  ///< a toy_buffer actor between the stage and the learner
  bool aux = false;     ///< (without a buffer) a second learner fed by the stage
};

/// Run fields for stages killed at random many times: no restart limit in the way.
const std::string kUnlimitedRestarts = "maxRestarts = 1000000, maxStartupFailures = 1000000, ";

class Schedules : public testing::scratch_test {
 protected:
  /// Runs one graph to the end under the test scheduler, picking the next job at random.
  run_outcome run_random(const graph::loaded_graph& g, std::mt19937& rng, records& steps,
                         const std::filesystem::path& run_dir, bool resume,
                         std::function<void(const live_view&)> on_live = nullptr) {
    caf::actor_system_config cfg;
    cfg.set("scheduler.policy", caf::atom("testing"));
    cfg.add_message_types<caf::id_block::milesrt_runtime>();
    caf::actor_system sys{cfg};
    auto& sched = dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
    run_outcome outcome;
    driver_options opts;
    opts.on_step = [&](const step_record& r) { steps.push_back(r); };
    opts.on_finish = [&](const run_outcome& o) { outcome = o; };
    if (on_live) {
      opts.on_live = on_live;
      opts.live_interval = std::chrono::milliseconds(0);
    }
    if (resume) {
      auto latest = latest_checkpoint(run_dir);
      EXPECT_TRUE(latest);
      opts.resume = true;
      opts.resume_dir = *latest;
    }
    spawn_driver(sys, build_plan(sys, g, kinds_, run_dir, nullptr), opts);
    size_t jobs = 0;
    while (!outcome.finished) {
      if (sched.jobs.empty()) {
        ADD_FAILURE() << "the run stalled: no actor has work and the run has not ended";
        break;
      }
      std::uniform_int_distribution<size_t> pick(0, sched.jobs.size() - 1);
      std::swap(sched.jobs.front(), sched.jobs[pick(rng)]);
      sched.run_once();
      ++jobs;
    }
    sched.run();
    jobs_ += jobs;
    return outcome;
  }

  std::string fields(const schedule_case& c, int steps, int interval) {
    std::string stage = ", replicas = " + std::to_string(c.replicas) +
                        ", params = (custom = [(name = \"drop_every\", value = (int = " +
                        std::to_string(c.drop_every) + "))])";
    std::string f = testing::toy_graph(
        stage, c.async ? async_schedule(c.staleness, c.drop) : sync_schedule(),
        "(steps = " + std::to_string(steps) + ", batchSize = " + std::to_string(c.batch) +
            ", checkpointInterval = " + std::to_string(interval) + ")");
    if (c.capacity > 0) {
      f.replace(f.find("to = \"stage.items\")"), 19,
                "to = \"stage.items\", capacity = " + std::to_string(c.capacity) + ")");
    }
    if (c.aux && !c.buffer) f = with_second_learner(f);
    // With onStale = drop the driver has the buffer drop what went stale at the take.
    if (c.buffer) f = with_buffer(f, "");
    return f;
  }

  schedule_case random_case(std::mt19937& rng) {
    auto in = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    schedule_case c;
    int mode = in(0, 2);
    c.async = mode > 0;
    c.drop = mode == 2;
    c.staleness = in(0, 2);
    c.batch = in(1, 3);
    c.replicas = in(1, 3);
    c.steps = in(2, 4);
    c.drop_every = in(0, 1) ? 0 : in(2, 4);
    c.capacity = in(0, 2);
    c.buffer = in(0, 1) == 1;
    c.aux = in(0, 1) == 1;
    return c;
  }

  size_t jobs_ = 0;
};

}  // namespace milesrt::runtime::driver_testing
