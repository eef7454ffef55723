#include "runtime/metrics/metric_frame.hpp"

#include <map>

#include "runtime/driver/driver.hpp"

namespace milesrt::runtime {

std::string metric_value::tag() const {
  std::string t = group.empty() ? name : group + "/" + name;
  if (!label.empty()) t += "/" + label;
  return t;
}

namespace {

/// Counters that only grow during a run; the others (accepted can shrink when an item is dropped
/// at the batch, in_flight and buffered are levels) are gauges.
bool monotone(std::string_view counter) {
  return counter == "admitted" || counter == "dropped_stale" || counter == "filtered" ||
         counter == "surplus" || counter == "stale_violations" || counter == "restarts";
}

metric_distribution distribution_of(std::string group, std::string name, const std::vector<double>& xs) {
  std::map<double, double> counts;
  for (double x : xs) counts[x] += 1;
  return {std::move(group), std::move(name), {counts.begin(), counts.end()}};
}

}  // namespace

std::vector<metric_value> counter_values(const driver_counters& c) {
  std::vector<metric_value> out;
  for (const auto& [name, value] : c.named()) {
    out.push_back({"counters", std::string(name), "", "", double(value),
                   monotone(name) ? metric_kind::counter : metric_kind::gauge});
  }
  return out;
}

metric_frame to_frame(const step_record& r, double wall_time) {
  metric_frame f;
  f.step = r.step;
  f.wall_time = wall_time;
  f.values.push_back({"run", "version", "", "", double(r.version), metric_kind::gauge});
  f.values.push_back({"run", "step_seconds", "", "", r.seconds, metric_kind::gauge});
  for (const auto& [actor, secs] : r.busy_seconds) {
    f.values.push_back({"run", "busy_seconds", "actor", actor, secs, metric_kind::gauge});
  }
  for (auto& v : counter_values(r.counters)) f.values.push_back(std::move(v));
  for (const auto& [name, value] : r.metrics) f.values.push_back({"", name, "", "", value, metric_kind::gauge});
  if (!r.staleness.empty()) {
    metric_distribution d{"run", "staleness", {}};
    for (const auto& [s, n] : r.staleness) d.counts.emplace_back(double(s), double(n));
    f.distributions.push_back(std::move(d));
  }
  for (const auto& [name, xs] : r.lists) f.distributions.push_back(distribution_of("", name, xs));
  return f;
}

}  // namespace milesrt::runtime
