#pragma once
/// Plots of a run's metrics: one panel per metric against the step, as a standalone SVG file
/// (no plotting library; any browser shows it).

#include <filesystem>
#include <string>
#include <vector>

namespace milesrt::runtime {

/// Reads RUN_DIR/metrics.jsonl and writes `out` with one panel per name in `metrics` (a step
/// without the metric leaves a gap; a metric no step has is drawn as an empty panel that says
/// so). Throws naming the file when it cannot be read or written.
void write_svg_plot(const std::filesystem::path& metrics_jsonl,
                    const std::vector<std::string>& metrics, const std::filesystem::path& out,
                    const std::string& title);

}  // namespace milesrt::runtime
