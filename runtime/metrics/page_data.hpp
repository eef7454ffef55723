#pragma once
/// What the live page reads, as JSON: the live view of the graph (GET /api/live) and the steps'
/// values by tag (GET /api/steps?since=N). `milesrt run` answers from memory (page_sink),
/// `milesrt watch RUN_DIR` from RUN_DIR/live.json and metrics.jsonl; both through add_page_routes.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/http/http_server.hpp"
#include "runtime/metrics/metric_frame.hpp"

namespace milesrt::runtime {

/// {"graph", "state", "error", "step", "steps", "version", "published", "wall_time",
///  "actors": [{name, kind, role, state, replicas, in_flight, queued, placement}],
///  "edges": [{from, to, queued, in_flight}], "counters": {name: value}}
nlohmann::json to_json(const live_view& v);

/// {"step": n, "values": {tag: value}}: every value and, per distribution, its mean (tag/mean).
nlohmann::json to_json(const metric_frame& f);

/// Where the page's data comes from.
struct page_source {
  /// The live view with "charts" (the metrics to chart) added.
  std::function<nlohmann::json()> live;
  /// The frames (as to_json) with a step greater than `since`, ascending.
  std::function<nlohmann::json(uint64_t since)> steps;
};

/// Adds GET / (the page, embedded in the binary), /api/live and /api/steps to `server`.
void add_page_routes(http_server& server, page_source source);

/// The metrics a page charts: `chart`, or else `plot` and the progress metric.
std::vector<std::string> charted_metrics(const std::vector<std::string>& chart,
                                         const std::vector<std::string>& plot,
                                         const std::string& progress_metric);

}  // namespace milesrt::runtime
