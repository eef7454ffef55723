#pragma once
/// The `prometheus` sink: GET /metrics in Prometheus' text exposition format (version 0.0.4).
/// Every value of the last step as `milesrt_<name>` (counters end in `_total`; a labelled value
/// carries its label, e.g. `milesrt_busy_seconds{actor="stage"}`), and from the live view the
/// step, versions, and per actor and edge the queue depths and requests in flight.

#include <mutex>
#include <optional>
#include <string>

#include "runtime/http/http_server.hpp"
#include "runtime/metrics/metric_sink.hpp"

namespace milesrt::runtime {

class prometheus_sink : public metric_sink {
 public:
  /// Adds GET /metrics to `server` (before it starts).
  explicit prometheus_sink(http_server& server);
  void on_step(const metric_frame& frame) override;
  void on_live(const live_view& view) override;

  /// The exposition text now.
  std::string render() const;

 private:
  mutable std::mutex mutex_;
  std::optional<metric_frame> last_;
  std::optional<live_view> live_;
};

/// `milesrt_` + the name with every character outside [a-zA-Z0-9_] made '_'.
std::string prometheus_name(const std::string& name);

}  // namespace milesrt::runtime
