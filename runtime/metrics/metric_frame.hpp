#pragma once
/// The numbers of a run as its metric sinks see them: per step a frame of named values (and lists
/// whose distribution a sink may draw), and at any moment a live view of the graph's actors and
/// queues. Sinks know names and values, never what they mean.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace milesrt::runtime {

struct step_record;

enum class metric_kind {
  gauge,   ///< a value that goes up and down
  counter  ///< a count that only grows during a run
};

/// One number: a name, an optional label (which actor, which edge), the value.
struct metric_value {
  std::string group;      ///< "" (what actors reported), "run", "counters": a prefix of the tag
  std::string name;       ///< "version", "loss", "busy_seconds"
  std::string label_key;  ///< "" or e.g. "actor"
  std::string label;      ///< e.g. "stage"
  double value = 0;
  metric_kind kind = metric_kind::gauge;

  /// The name charts and TensorBoard show: [group/]name[/label].
  std::string tag() const;
};

/// Values whose distribution a sink may draw: the distinct values, ascending, with their counts.
struct metric_distribution {
  std::string group;
  std::string name;
  std::vector<std::pair<double, double>> counts;

  std::string tag() const { return group.empty() ? name : group + "/" + name; }
};

/// Histogram buckets of a distribution: (right edge, count) per bucket, the first bucket starting
/// at the smallest value. Exact (one bucket per distinct value) up to `max_buckets` values, else
/// `max_buckets` buckets of equal width.
std::vector<std::pair<double, double>> histogram_buckets(const metric_distribution& d,
                                                         size_t max_buckets = 64);

/// One step of a run.
struct metric_frame {
  uint64_t step = 0;
  double wall_time = 0;  ///< seconds since the Unix epoch when the frame was made
  std::vector<metric_value> values;
  std::vector<metric_distribution> distributions;
};

/// The frame of one step: version, step and busy seconds (group "run"), the driver's counters
/// ("counters"), what the actors reported (no group), the staleness histogram and the lists the
/// actors reported as distributions.
metric_frame to_frame(const step_record& r, double wall_time);

struct driver_counters;
/// The driver's counters as values of the group "counters" (counters or gauges by their nature).
std::vector<metric_value> counter_values(const driver_counters& c);

/// One actor of the graph at a moment.
struct live_actor {
  std::string name, kind, role;
  std::string state;  ///< "idle", "busy" (requests outstanding), "done", "failed"
  uint32_t replicas = 1;
  uint64_t in_flight = 0;  ///< requests sent to it, not answered yet
  uint64_t queued = 0;     ///< items waiting on the edges into it
  std::string placement;   ///< "" or the worker process hosting it
};

/// One edge of the graph at a moment.
struct live_edge {
  std::string from, to;  ///< "actor.port"
  uint64_t queued = 0;
  uint64_t in_flight = 0;
};

/// The graph and its schedule at a moment (made by the driver).
struct live_view {
  std::string graph;
  std::string state = "running";  ///< "running", "finished", "failed"
  std::string error;
  uint64_t step = 0, steps = 0, version = 0, published = 0;
  double wall_time = 0;
  std::vector<live_actor> actors;
  std::vector<live_edge> edges;
  std::vector<metric_value> counters;  ///< the driver's counters now
};

}  // namespace milesrt::runtime
