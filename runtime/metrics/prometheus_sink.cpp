#include "runtime/metrics/prometheus_sink.hpp"

#include <cmath>
#include <cstdio>
#include <set>

namespace milesrt::runtime {

std::string prometheus_name(const std::string& name) {
  std::string out = "milesrt_";
  for (char c : name) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    out.push_back(ok ? c : '_');
  }
  return out;
}

namespace {

std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string label_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

/// Writes families one at a time; a family (name) is written once, its samples together.
class exposition {
 public:
  /// Starts a family unless one of that name was written (then its samples are skipped).
  bool family(const std::string& name, metric_kind kind, const std::string& help) {
    current_ = name;
    if (!seen_.insert(name).second) return false;
    text_ += "# HELP " + name + " " + help + "\n";
    text_ += "# TYPE " + name + (kind == metric_kind::counter ? " counter\n" : " gauge\n");
    return true;
  }
  void sample(const std::string& label_key, const std::string& label, double v) {
    text_ += current_;
    if (!label_key.empty()) text_ += "{" + label_key + "=\"" + label_value(label) + "\"}";
    text_ += " " + number(v) + "\n";
  }
  std::string text() const { return text_; }

 private:
  std::set<std::string> seen_;
  std::string current_;
  std::string text_;
};

}  // namespace

prometheus_sink::prometheus_sink(http_server& server) {
  server.route("/metrics", [this](const std::string&) {
    return http_response{200, "text/plain; version=0.0.4; charset=utf-8", render()};
  });
}

void prometheus_sink::on_step(const metric_frame& frame) {
  std::lock_guard<std::mutex> lock(mutex_);
  last_ = frame;
}

void prometheus_sink::on_live(const live_view& view) {
  std::lock_guard<std::mutex> lock(mutex_);
  live_ = view;
}

std::string prometheus_sink::render() const {
  std::lock_guard<std::mutex> lock(mutex_);
  exposition x;
  if (live_) {
    const auto& v = *live_;
    if (x.family("milesrt_step", metric_kind::gauge, "Completed steps of the run."))
      x.sample("", "", double(v.step));
    if (x.family("milesrt_steps", metric_kind::gauge, "Steps the run is asked to make."))
      x.sample("", "", double(v.steps));
    if (x.family("milesrt_version", metric_kind::gauge, "The learner's version."))
      x.sample("", "", double(v.version));
    if (x.family("milesrt_published_version", metric_kind::gauge,
                 "The version every receiver holds."))
      x.sample("", "", double(v.published));
    if (x.family("milesrt_running", metric_kind::gauge, "1 while the run runs, 0 once it ended."))
      x.sample("", "", v.state == "running" ? 1 : 0);
    if (x.family("milesrt_actor_replicas", metric_kind::gauge, "Replicas of each actor."))
      for (const auto& a : v.actors) x.sample("actor", a.name, a.replicas);
    if (x.family("milesrt_actor_in_flight", metric_kind::gauge,
                 "Requests sent to each actor, not answered yet."))
      for (const auto& a : v.actors) x.sample("actor", a.name, double(a.in_flight));
    if (x.family("milesrt_actor_queue_depth", metric_kind::gauge,
                 "Items waiting on the edges into each actor."))
      for (const auto& a : v.actors) x.sample("actor", a.name, double(a.queued));
    if (x.family("milesrt_edge_queue_depth", metric_kind::gauge, "Items waiting on each edge."))
      for (const auto& e : v.edges) x.sample("edge", e.from + "->" + e.to, double(e.queued));
    if (x.family("milesrt_edge_in_flight", metric_kind::gauge,
                 "Items of each edge being processed."))
      for (const auto& e : v.edges) x.sample("edge", e.from + "->" + e.to, double(e.in_flight));
  }
  if (last_ && x.family("milesrt_values_step", metric_kind::gauge,
                        "The step the values below come from (the last one ended)."))
    x.sample("", "", double(last_->step));
  // The driver's counters: the live ones when there are, else the last step's.
  std::vector<metric_value> values;
  if (live_) values = live_->counters;
  if (last_) values.insert(values.end(), last_->values.begin(), last_->values.end());
  std::set<std::string> done;
  for (size_t i = 0; i < values.size(); ++i) {
    const auto& v = values[i];
    bool counter = v.kind == metric_kind::counter;
    std::string name = prometheus_name(v.name) + (counter ? "_total" : "");
    if (!done.insert(name + "\x1f" + v.label).second) continue;  // the live value came first
    std::string help =
        v.group == "counters" ? "The driver's counter '" + v.name + "'."
        : v.group == "run"
            ? "'" + v.name + "' of the last step."
            : "'" + v.name + "' as the actors reported it (mean over the last step).";
    // Samples of one family must be together: write this one's, then skip them later.
    if (!x.family(name, counter ? metric_kind::counter : metric_kind::gauge, help)) continue;
    for (size_t j = i; j < values.size(); ++j) {
      const auto& w = values[j];
      if (prometheus_name(w.name) + (w.kind == metric_kind::counter ? "_total" : "") != name)
        continue;
      if (j != i && !done.insert(name + "\x1f" + w.label).second) continue;
      x.sample(w.label_key, w.label, w.value);
    }
  }
  return x.text();
}

}  // namespace milesrt::runtime
