#pragma once
/// The metric sinks of one run, picked by the graph's run block (`sinks`, `chart`, `metricsPort`)
/// and the command line: every step and live view goes to each of them. live.json is always
/// written; `prometheus` and `page` share one HTTP server on the loopback interface.

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "runtime/http/http_server.hpp"
#include "runtime/metrics/metric_sink.hpp"

namespace milesrt::runtime {

struct step_record;

struct sink_options {
  std::filesystem::path run_dir;
  bool tensorboard = false;
  bool prometheus = false;
  bool page = false;
  uint16_t port = 0;                ///< of the HTTP server; 0: a free one
  std::vector<std::string> charts;  ///< what the page charts
};

class metric_sinks {
 public:
  /// Opens every sink: the event file, the server's port. Throws std::runtime_error naming what
  /// could not be opened (an unwritable folder, a port in use).
  explicit metric_sinks(const sink_options& options);
  ~metric_sinks();

  void on_step(const step_record& r);
  void on_live(const live_view& v);
  void on_finish();

  /// "http://127.0.0.1:PORT/" of the HTTP server, "" when no sink needs one.
  std::string url() const;

 private:
  std::vector<std::unique_ptr<metric_sink>> sinks_;
  std::unique_ptr<http_server> server_;  // after the sinks: stopped before they go
};

}  // namespace milesrt::runtime
