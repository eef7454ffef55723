#pragma once
/// A metric sink: where a run's numbers go besides metrics.jsonl (TensorBoard event files, the
/// Prometheus endpoint, the live page). One file per implementation; each knows metric names and
/// values, never what they mean. Calls come from the schedule driver's thread, one at a time.

#include "runtime/metrics/metric_frame.hpp"

namespace milesrt::runtime {

class metric_sink {
 public:
  virtual ~metric_sink() = default;
  /// A step ended.
  virtual void on_step(const metric_frame& frame) = 0;
  /// The graph's actors and queues now (at the start, after each step, at the end, in between).
  virtual void on_live(const live_view&) {}
  /// The run ended (after the last on_live).
  virtual void on_finish() {}
};

}  // namespace milesrt::runtime
