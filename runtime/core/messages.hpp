#pragma once
/// The messages of the actor-graph runtime: the versioned item envelope, the replies of actors to
/// the schedule driver, and the CAF type-ID ranges.
///
/// CAF type-ID ranges (owned here; caf::first_custom_type_id is 200):
///   [first + 0,    first + 100)   milesrt_runtime: the types below
///   [first + 100,  first + 1000)  the built-in kinds and their libraries, a block of 100 per
///                                 library that declares types (docs/architecture.md lists them)
///   [first + 1000, first + 10000) plugins: each plugin takes a block of 100, chosen by its author
///
/// Atoms (CAF 0.17: at most 10 characters) name the requests; each request carries a deadline.

#include <caf/atom.hpp>
#include <caf/message.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/type_id.hpp>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace milesrt::runtime {

/// Version of the envelope layout; a receiver refuses envelopes with a newer format.
constexpr uint16_t envelope_format = 2;

/// One item travelling along the graph's edges. The payload belongs to the producing kind; the
/// runtime reads only the header.
struct envelope {
  uint16_t format = envelope_format;
  /// The admitted work item this envelope descends from (assigned by the driver at admission).
  uint64_t origin = 0;
  /// Which of the graph's sources admitted it (its index among them, in graph order).
  uint32_t source = 0;
  /// Oldest and newest model version that produced any part of the payload. Staleness of an item =
  /// the learner's version - min_version. A producing actor sets them (e.g. from the versions of
  /// its parts).
  uint64_t min_version = 0;
  uint64_t max_version = 0;
  caf::message payload;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, envelope& x) {
  return f(caf::meta::type_name("envelope"), x.format, x.origin, x.source, x.min_version,
           x.max_version, x.payload);
}

/// One message an actor emits on one of its output ports.
struct output {
  std::string port;
  envelope item;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, output& x) {
  return f(caf::meta::type_name("output"), x.port, x.item);
}

/// Named numbers an actor reports with a reply; the driver aggregates them per step.
using metric_map = std::map<std::string, double>;

/// Named lists of numbers an actor reports with a reply (e.g. one value per item it handled); the
/// driver concatenates them per step and the metric sinks draw their distributions.
using metric_lists = std::map<std::string, std::vector<double>>;

/// The reply to `produce` and `process`: what the actor emits, and what it measured.
struct node_reply {
  std::vector<output> outputs;
  metric_map metrics;
  metric_lists lists;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_reply& x) {
  return f(caf::meta::type_name("node_reply"), x.outputs, x.metrics, x.lists);
}

/// The reply to `train`: the learner's new version, what it emits (e.g. its weights), metrics.
/// A non-empty `stop` ends the run after this step (e.g. early stopping), with `stop` as the
/// reason the run reports.
struct train_reply {
  uint64_t version = 0;
  std::vector<output> outputs;
  metric_map metrics;
  std::string stop;
  metric_lists lists;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, train_reply& x) {
  return f(caf::meta::type_name("train_reply"), x.version, x.outputs, x.metrics, x.stop, x.lists);
}

/// The reply of a buffer to `put` and `take`.
struct buffer_reply {
  std::vector<envelope>
      items;          ///< take: the batch, in the order served (empty: not enough to serve)
  uint64_t size = 0;  ///< items held after this request
  uint64_t kept = 0;  ///< put: 1 when the item is held, 0 when it was discarded
  uint64_t dropped_stale = 0;  ///< items this request discarded as stale
  uint64_t stale_served = 0;   ///< take: items of the batch past the buffer's staleness bound
  uint64_t surplus = 0;        ///< take with discard_rest: what was left and discarded
  metric_map metrics;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, buffer_reply& x) {
  return f(caf::meta::type_name("buffer_reply"), x.items, x.size, x.kept, x.dropped_stale,
           x.stale_served, x.surplus, x.metrics);
}

/// An actor's state for a checkpoint, in a format of the kind's choosing.
struct actor_state {
  std::vector<uint8_t> bytes;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, actor_state& x) {
  return f(caf::meta::type_name("actor_state"), x.bytes);
}

/// What a worker process needs to spawn one actor of the graph: the graph as a flat Cap'n Proto
/// message (after overrides), the actor's name and replica, and the run's seed.
struct spawn_request {
  std::vector<uint8_t> graph;
  std::string actor;
  uint32_t replica = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, spawn_request& x) {
  return f(caf::meta::type_name("spawn_request"), x.graph, x.actor, x.replica);
}

// Requests of the driver. A source answers `produce`, a stage `process`, a learner `train`, a
// buffer `put` and `take`; every actor answers `snapshot` and `restore`.
using produce_atom = caf::atom_constant<caf::atom("produce")>;  // (count) -> node_reply
using process_atom = caf::atom_constant<caf::atom("process")>;  // (port, envelope) -> node_reply
using train_atom = caf::atom_constant<caf::atom("train")>;      // (step, [envelope]) -> train_reply
// (port, envelope, learner version) -> buffer_reply
using put_atom = caf::atom_constant<caf::atom("put")>;
// (count, learner version, discard the rest, the schedule's staleness bound) -> buffer_reply
using take_atom = caf::atom_constant<caf::atom("take")>;
// Checkpoints: the actor may write files of its own under `dir` (e.g. model weights) and returns
// the small rest of its state inline; restore gets both back.
using snapshot_atom = caf::atom_constant<caf::atom("snapshot")>;  // (dir) -> actor_state
using restore_atom = caf::atom_constant<caf::atom("restore")>;    // (dir, actor_state) -> bool
using join_atom = caf::atom_constant<caf::atom("join")>;          // worker -> driver: (name, actor)
using spawn_atom = caf::atom_constant<caf::atom("spawn")>;  // driver -> worker: (spawn_request)
// driver -> the run's worker directory: (name, node of the lost process) -> the host actor of a
// worker that joined under `name` from another process (answered once one has).
using rejoin_atom = caf::atom_constant<caf::atom("rejoin")>;

}  // namespace milesrt::runtime

CAF_BEGIN_TYPE_ID_BLOCK(milesrt_runtime, caf::first_custom_type_id)
CAF_ADD_TYPE_ID(milesrt_runtime, (milesrt::runtime::envelope))
CAF_ADD_TYPE_ID(milesrt_runtime, (milesrt::runtime::output))
CAF_ADD_TYPE_ID(milesrt_runtime, (std::vector<milesrt::runtime::output>))
CAF_ADD_TYPE_ID(milesrt_runtime, (std::vector<milesrt::runtime::envelope>))
CAF_ADD_TYPE_ID(milesrt_runtime, (milesrt::runtime::metric_map))
CAF_ADD_TYPE_ID(milesrt_runtime, (milesrt::runtime::node_reply))
CAF_ADD_TYPE_ID(milesrt_runtime, (milesrt::runtime::train_reply))
CAF_ADD_TYPE_ID(milesrt_runtime, (milesrt::runtime::actor_state))
CAF_ADD_TYPE_ID(milesrt_runtime, (milesrt::runtime::spawn_request))
CAF_ADD_TYPE_ID(milesrt_runtime, (std::vector<uint8_t>))
CAF_ADD_TYPE_ID(milesrt_runtime, (milesrt::runtime::buffer_reply))
CAF_END_TYPE_ID_BLOCK(milesrt_runtime)
