#pragma once
/// The `page` sink: the live page of a running graph (GET / on the run's HTTP server), fed from
/// memory: the live view of the actors and every step's values.

#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/http/http_server.hpp"
#include "runtime/metrics/metric_sink.hpp"

namespace milesrt::runtime {

class page_sink : public metric_sink {
 public:
  /// Adds the page's routes to `server` (before it starts); `charts` are the metrics it charts.
  page_sink(http_server& server, std::vector<std::string> charts);
  void on_step(const metric_frame& frame) override;
  void on_live(const live_view& view) override;

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> charts_;
  nlohmann::json live_ = nlohmann::json::object();
  std::vector<nlohmann::json> steps_;
};

}  // namespace milesrt::runtime
