#include "runtime/metrics/metric_frame.hpp"

#include <algorithm>
#include <cmath>
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
         counter == "surplus" || counter == "stale_violations" || counter == "restarts" ||
         counter == "requeued";
}

metric_distribution distribution_of(std::string group, std::string name,
                                    const std::vector<double>& xs) {
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

std::vector<std::pair<double, double>> histogram_buckets(const metric_distribution& d,
                                                         size_t max_buckets) {
  if (d.counts.size() <= max_buckets) return d.counts;
  const double lo = d.counts.front().first, hi = d.counts.back().first;
  const double width = (hi - lo) / double(max_buckets);
  std::vector<std::pair<double, double>> out(max_buckets);
  for (size_t i = 0; i < max_buckets; ++i)
    out[i] = {i + 1 == max_buckets ? hi : lo + width * double(i + 1), 0};
  for (const auto& [x, n] : d.counts) {
    size_t i = 0;
    if (x > lo) i = std::min(max_buckets - 1, static_cast<size_t>(std::ceil((x - lo) / width)) - 1);
    // Floating error at an edge: the value belongs to the first bucket whose edge reaches it.
    while (i + 1 < max_buckets && x > out[i].first) ++i;
    while (i > 0 && x <= out[i - 1].first) --i;
    out[i].second += n;
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
  for (const auto& [actor, secs] : r.active_seconds) {
    f.values.push_back({"run", "active_seconds", "actor", actor, secs, metric_kind::gauge});
  }
  f.values.push_back({"run", "idle_seconds", "", "", r.idle_seconds, metric_kind::gauge});
  for (auto& v : counter_values(r.counters)) f.values.push_back(std::move(v));
  for (const auto& [name, value] : r.metrics)
    f.values.push_back({"", name, "", "", value, metric_kind::gauge});
  if (!r.staleness.empty()) {
    metric_distribution d{"run", "staleness", {}};
    for (const auto& [s, n] : r.staleness) d.counts.emplace_back(double(s), double(n));
    f.distributions.push_back(std::move(d));
  }
  for (const auto& [name, xs] : r.lists) f.distributions.push_back(distribution_of("", name, xs));
  return f;
}

}  // namespace milesrt::runtime
