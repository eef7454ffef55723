#pragma once
/// Running a validated graph: spawn its actors, drive its schedule, write metrics and checkpoints.

#include <caf/fwd.hpp>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>

#include "runtime/core/kind.hpp"
#include "runtime/core/messages.hpp"
#include "runtime/driver/driver.hpp"
#include "runtime/driver/plan.hpp"
#include "runtime/graph/loader.hpp"
#include "runtime/metrics/metric_sinks.hpp"

namespace milesrt::runtime {

/// Spawns an actor on the worker process named `worker`; returns its handle or throws naming the
/// worker. Null where the run has no workers.
using remote_spawner = std::function<caf::actor(const std::string& worker, const spawn_request&)>;

/// The setup of one replica of `actor`, as its kind's factory receives it.
actor_setup make_setup(const graph::loaded_graph& g, schema::ActorSpec::Reader actor,
                       const kind_descriptor& kind, uint32_t replica,
                       const std::filesystem::path& run_dir, std::shared_ptr<process_store> store,
                       std::FILE* progress = nullptr);

/// Spawns every actor (locally, or through `remote` for placed ones) and builds the routes.
/// Throws std::runtime_error naming the actor when a spawn fails. `g` must outlive the run.
graph_plan build_plan(caf::actor_system& sys, const graph::loaded_graph& g,
                      const kind_registry& kinds, const std::filesystem::path& run_dir,
                      const remote_spawner& remote, std::FILE* progress = nullptr);

struct run_request {
  std::filesystem::path run_dir;  ///< empty: the graph's run.dir
  bool resume = false;            ///< continue from the newest complete checkpoint in run_dir
  /// With resume: refuse to fall back past a newer checkpoint that is corrupt (its manifest was
  /// written but its files do not match it), rather than resume from an older one.
  bool strict_resume = false;
  /// One line per checkpoint passed over on resume, and the one resumed from after a fallback.
  std::function<void(const std::string&)> warn;
  std::FILE* progress = stderr;  ///< progress line; null for none
  remote_spawner remote;
  /// The rendezvous' directory (worker_rendezvous::directory), where lost workers are replaced.
  caf::actor worker_directory;
  /// The metric sinks besides metrics.jsonl (made by the caller, so that a port in use is an
  /// error before anything starts); null: the graph's own (sinks_for).
  std::shared_ptr<metric_sinks> sinks;
  /// Extra per-step observer (tests).
  std::function<void(const step_record&)> on_step;
};

/// Runs the graph to the end and returns how it ended; summary.json and metrics.jsonl are in the
/// run directory. Never hangs: every request has a deadline.
run_outcome run_graph(caf::actor_system& sys, const graph::loaded_graph& g,
                      const kind_registry& kinds, const run_request& req);

/// The sinks the graph's run block asks for, in `run_dir`; `port` > 0 overrides run.metricsPort.
sink_options sinks_for(const graph::loaded_graph& g, const std::filesystem::path& run_dir,
                       int port = -1);

/// Why files cannot be written in `dir` (created if missing), or "" when they can.
std::string unwritable_dir(const std::filesystem::path& dir);

/// The run directory a request resolves to.
std::filesystem::path resolve_run_dir(const graph::loaded_graph& g, const run_request& req);

}  // namespace milesrt::runtime
