#pragma once
/// The schedule driver: a CAF actor that admits work into the source, routes every item along the
/// graph's edges as requests with deadlines, assembles the learner's batches (applying the
/// schedule's rules), checkpoints, and writes metrics. `sync` and `async` (bounded staleness) are
/// two schedule policies of it (schedule_policy.hpp).

#include <caf/actor.hpp>
#include <caf/fwd.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "runtime/core/messages.hpp"
#include "runtime/driver/driver_counters.hpp"
#include "runtime/driver/plan.hpp"
#include "runtime/metrics/metric_frame.hpp"

namespace milesrt::runtime {

/// What one training step looked like; one line of metrics.jsonl.
struct step_record {
  uint64_t step = 0;                           ///< 1-based
  uint64_t version = 0;                        ///< the learner's version after the step
  double seconds = 0;                          ///< wall time since the previous step ended
  std::map<std::string, double> busy_seconds;  ///< per actor: time its requests were outstanding
  /// Per actor: wall time of the step during which it had a request outstanding (overlapping
  /// requests counted once); at most `seconds`.
  std::map<std::string, double> active_seconds;
  /// Wall time of the step during which no actor had a request outstanding: the driver's own
  /// time between answers and requests (what the step costs beyond the actors' work).
  double idle_seconds = 0;
  std::map<uint64_t, uint64_t> staleness;  ///< of the batch: staleness -> items
  driver_counters counters;                ///< after the step
  metric_map metrics;                      ///< what the actors reported (mean per step)
  metric_lists lists;                      ///< the lists the actors reported, concatenated
  std::vector<uint64_t> batch_origins;     ///< which admitted items the batch came from
  /// With several sources: how many items of the batch each one admitted (by name).
  std::map<std::string, uint64_t> batch_sources;
};

/// How a run ended.
/// A work item a stage rejected as bad input: which actor, which item (its origin), why.
struct rejected_item {
  std::string actor;
  uint64_t item = 0;
  std::string reason;
};

struct run_outcome {
  bool finished = false;
  bool ok = false;
  std::string error;  ///< one line naming what went wrong
  /// Refused before anything started: resume found no checkpoint it may resume from.
  bool refused = false;
  std::string note;  ///< why a successful run ended early, if it did
  uint64_t steps = 0;
  uint64_t version = 0;
  driver_counters counters;
  /// The first items rejected as bad input (at most 20; the log names every one).
  std::vector<rejected_item> rejected;
};

/// A fault injected by tests (MILESRT_TEST_KILL_REPLICA, docs/testing.md): the driver kills
/// replica `replica` of the actor `actor` (exit reason kill, as a crash would end it) right after
/// sending it its `after`-th work item, once in the run process. Its restart is the ordinary one.
struct replica_fault {
  std::string actor;
  uint32_t replica = 0;
  uint64_t after = 1;
};

/// Parses "ACTOR:REPLICA:ITEMS" (the variable's value); nullopt when it is not of that form.
std::optional<replica_fault> parse_replica_fault(const std::string& text);

struct driver_options {
  bool resume = false;               ///< restore from `resume_dir` before starting
  std::filesystem::path resume_dir;  ///< a committed checkpoint folder
  /// Called after every step (metrics writer, progress line, tests).
  std::function<void(const step_record&)> on_step;
  /// Called once when the run ends, from the driver's thread.
  std::function<void(const run_outcome&)> on_finish;
  /// Called with the graph's actors and queues as they are: at the start, after each step, at the
  /// end, and in between at most every `live_interval` (live page, Prometheus).
  std::function<void(const live_view&)> on_live;
  std::chrono::milliseconds live_interval{250};
  /// Where checkpoints report their progress (stderr), or null for none.
  std::FILE* progress = nullptr;
  /// Tests only: kill one replica as a crash would (see replica_fault).
  std::optional<replica_fault> kill_replica;
};

/// Spawns the driver; it starts at once and quits when the run ends (see driver_options).
caf::actor spawn_driver(caf::actor_system& sys, graph_plan plan, driver_options options);

}  // namespace milesrt::runtime
