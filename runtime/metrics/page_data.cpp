#include "runtime/metrics/page_data.hpp"

#include <algorithm>

#include "runtime/metrics/page_assets.hpp"

namespace milesrt::runtime {

nlohmann::json to_json(const live_view& v) {
  nlohmann::json j;
  j["graph"] = v.graph;
  j["state"] = v.state;
  j["error"] = v.error;
  j["step"] = v.step;
  j["steps"] = v.steps;
  j["version"] = v.version;
  j["published"] = v.published;
  j["wall_time"] = v.wall_time;
  j["actors"] = nlohmann::json::array();
  for (const auto& a : v.actors) {
    j["actors"].push_back({{"name", a.name},
                           {"kind", a.kind},
                           {"role", a.role},
                           {"state", a.state},
                           {"replicas", a.replicas},
                           {"in_flight", a.in_flight},
                           {"queued", a.queued},
                           {"placement", a.placement}});
  }
  j["edges"] = nlohmann::json::array();
  for (const auto& e : v.edges) {
    j["edges"].push_back(
        {{"from", e.from}, {"to", e.to}, {"queued", e.queued}, {"in_flight", e.in_flight}});
  }
  j["counters"] = nlohmann::json::object();
  for (const auto& c : v.counters) j["counters"][c.name] = c.value;
  return j;
}

nlohmann::json to_json(const metric_frame& f) {
  nlohmann::json values = nlohmann::json::object();
  for (const auto& v : f.values) values[v.tag()] = v.value;
  for (const auto& d : f.distributions) {
    double n = 0, sum = 0;
    for (const auto& [x, c] : d.counts) {
      n += c;
      sum += x * c;
    }
    if (n > 0) values[d.tag() + "/mean"] = sum / n;
  }
  return {{"step", f.step}, {"wall_time", f.wall_time}, {"values", values}};
}

std::vector<std::string> charted_metrics(const std::vector<std::string>& chart,
                                         const std::vector<std::string>& plot,
                                         const std::string& progress_metric) {
  if (!chart.empty()) return chart;
  std::vector<std::string> out = plot;
  if (!progress_metric.empty() && std::find(out.begin(), out.end(), progress_metric) == out.end()) {
    out.push_back(progress_metric);
  }
  return out;
}

void add_page_routes(http_server& server, page_source source) {
  server.route("/", [](const std::string&) {
    return http_response{200, "text/html; charset=utf-8", std::string(page_html)};
  });
  server.route("/api/live", [source](const std::string&) {
    return http_response{
        200, "application/json",
        source.live().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
  });
  server.route("/api/steps", [source](const std::string& query) {
    uint64_t since = 0;
    auto at = query.find("since=");
    if (at != std::string::npos) {
      try {
        since = std::stoull(query.substr(at + 6));
      } catch (const std::exception&) {
        return http_response{400, "text/plain; charset=utf-8", "since: expected a step number\n"};
      }
    }
    return http_response{
        200, "application/json",
        source.steps(since).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
  });
}

}  // namespace milesrt::runtime
