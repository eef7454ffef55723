#pragma once
/// Metrics of a run: RUN_DIR/metrics.jsonl (one JSON object per step), RUN_DIR/summary.json at the
/// end, and a live progress line on a terminal.

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/core/timer.hpp"
#include "runtime/driver/driver.hpp"

namespace milesrt::runtime {

/// The JSON form of one step (the line written to metrics.jsonl).
nlohmann::json to_json(const step_record& r);
/// A line of metrics.jsonl read back (the inverse of to_json); throws on a malformed line.
step_record step_record_from_json(const nlohmann::json& j);

/// Cuts RUN_DIR/metrics.jsonl back to the steps up to `step` (a resume from checkpoint `step`): the
/// lines a crashed run wrote after its newest checkpoint are redone by the resumed run, and a line
/// cut short by the crash is dropped. Rewritten through a temporary file; throws naming the file.
void keep_steps_through(const std::filesystem::path& jsonl, uint64_t step);

class metrics_writer {
 public:
  /// `progress` is where the progress line goes (stderr), or null for none. On a terminal the line
  /// is redrawn in place; elsewhere one line per step is printed.
  metrics_writer(const std::filesystem::path& run_dir, std::string graph_name,
                 std::string progress_metric, uint64_t total_steps, std::FILE* progress,
                 bool append);
  /// Appends the step to metrics.jsonl; throws naming the file and the reason when it cannot (and
  /// for every step after: nothing is recorded past a gap).
  void on_step(const step_record& r);
  /// Writes summary.json (throws naming it when it cannot); returns the one-line summary printed
  /// at the end.
  std::string on_finish(const run_outcome& o);

 private:
  std::filesystem::path run_dir_;
  std::string graph_name_, progress_metric_;
  uint64_t total_steps_;
  std::FILE* progress_;
  bool tty_;
  std::ofstream jsonl_;
  timer start_;
  uint64_t steps_seen_ = 0;
  uint64_t unrecorded_ = 0;  ///< the first step metrics.jsonl could not take, or 0
  nlohmann::json last_metrics_ = nlohmann::json::object();
};

}  // namespace milesrt::runtime
