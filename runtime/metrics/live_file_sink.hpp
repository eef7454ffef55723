#pragma once
/// Always on: RUN_DIR/live.json, the graph's actors and queues as they were last seen (and the
/// metrics the page charts), rewritten atomically at most every half second and at the end.
/// `milesrt watch RUN_DIR` reads it beside metrics.jsonl.

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/metrics/metric_sink.hpp"

namespace milesrt::runtime {

class live_file_sink : public metric_sink {
 public:
  live_file_sink(std::filesystem::path run_dir, std::vector<std::string> charts);
  void on_step(const metric_frame&) override {}
  void on_live(const live_view& view) override;

 private:
  std::filesystem::path file_;
  std::vector<std::string> charts_;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace milesrt::runtime
