#pragma once
/// A validated graph turned into what the schedule driver runs: actors (spawned), routes, schedule.

#include <caf/actor.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "runtime/core/kind.hpp"
#include "runtime/core/messages.hpp"

namespace milesrt::runtime {

struct node_plan {
  std::string name;
  const kind_descriptor* kind = nullptr;
  std::vector<caf::actor> replicas;
  std::chrono::milliseconds deadline{600000};
  /// Spawns a fresh replica (for restarts of restartable kinds).
  std::function<caf::actor(uint32_t replica)> respawn;
  /// "" for the driver's process, else the worker hosting it.
  std::string placement;
  /// For a placed actor: what its worker is asked to spawn it again (after the worker was lost).
  std::function<spawn_request(uint32_t replica)> remote_request;
};

struct edge_plan {
  size_t from = 0;
  std::string from_port;
  size_t to = 0;
  std::string to_port;
  /// The most work items the edge holds at once, queued or in flight (for an edge into the learner:
  /// admitted and not yet trained, the learner's buffer included); upstream work waits for room.
  /// 0: the schedule's window (schedule_window), the most the schedule itself keeps open.
  uint32_t capacity = 0;
};

/// A service edge: every replica of `user` is handed all the replicas of `server` for its `uses`
/// port (runtime/core/services.hpp); no work item travels on it.
struct service_plan {
  size_t user = 0;
  std::string port;
  size_t server = 0;
  std::string server_port;
};

struct schedule_plan {
  bool async = false;
  uint32_t max_staleness = 0;
  bool drop_stale = false;
};

struct graph_plan {
  std::string graph_name;
  std::vector<node_plan> nodes;
  std::vector<edge_plan> edges;
  std::vector<service_plan> services;
  /// The sources (at least one), in graph order, and their weights (> 0): each admission is
  /// shared out among them in proportion (a smooth weighted round robin).
  std::vector<size_t> sources;
  std::vector<double> source_weights;
  /// The policy learner (the first learner in the graph): its version is the run's version.
  size_t learner = 0;
  /// Further learners (a value model, say): each step each one trains on its items of the origins
  /// in the policy learner's batch, beside it; the step ends when all have answered.
  std::vector<size_t> aux_learners;
  /// The buffer actor between the stages and the learner, or no_buffer: the driver keeps the
  /// learner's items in a first-in-first-out queue itself.
  static constexpr size_t no_buffer = SIZE_MAX;
  size_t buffer = no_buffer;
  schedule_plan schedule;
  uint32_t batch_size = 1;
  uint64_t steps = 1;
  uint32_t checkpoint_interval = 0;
  std::string progress_metric;
  std::filesystem::path run_dir;
  /// Where a lost worker's replacement is awaited (`rejoin`); null: a lost worker ends the run.
  caf::actor worker_directory;
  /// How long a lost worker's replacement is awaited.
  std::chrono::milliseconds worker_grace{0};
  /// Restarts of one replica of a restartable kind: at most max_restarts within restart_window,
  /// and fewer than max_startup_failures deaths in a row before answering anything.
  uint32_t max_restarts = 10;
  std::chrono::milliseconds restart_window{600000};
  uint32_t max_startup_failures = 3;
  /// Items stages may drop between two steps, as a multiple of batch_size (0: no bound).
  uint32_t max_over_sampling = 8;
};

}  // namespace milesrt::runtime
