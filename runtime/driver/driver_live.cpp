// The driver's telemetry: metric sums per step and the live view of the graph.
#include <algorithm>
#include <chrono>

#include "runtime/driver/driver_state.hpp"

namespace milesrt::runtime::driver_impl {

void add_metrics(driver self, const metric_map& m, const metric_lists& lists) {
  for (const auto& [k, v] : m) self->state.telemetry.metric_sums[k].push_back(v);
  for (const auto& [k, v] : lists) {
    auto& to = self->state.telemetry.lists[k];
    to.insert(to.end(), v.begin(), v.end());
  }
}

void note_activity(driver self) {
  auto& st = self->state;
  auto& t = st.telemetry;
  const auto now = steady::now();
  const double dt = t.activity_since == steady::time_point{}
                        ? 0.0
                        : std::chrono::duration<double>(now - t.activity_since).count();
  t.activity_since = now;
  if (dt <= 0) return;
  bool any = false;
  for (const auto& n : st.nodes) {
    const bool active = std::any_of(n.tickets.begin(), n.tickets.end(),
                                    [](const auto& open) { return !open.empty(); });
    if (!active) continue;
    t.active[n.plan.name] += dt;
    any = true;
  }
  if (any) t.any_active += dt;
}

/// The graph's actors and queues now, for the live page and Prometheus.
static live_view live_view_of(driver self, const std::string& state, const std::string& error) {
  auto& st = self->state;
  live_view v;
  v.graph = st.plan.graph_name;
  v.state = state;
  v.error = error;
  v.step = st.durable.step;
  v.steps = st.plan.steps;
  v.version = st.durable.version;
  v.published = st.flow.published;
  v.wall_time =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  for (size_t i = 0; i < st.nodes.size(); ++i) {
    const auto& n = st.nodes[i];
    live_actor a;
    a.name = n.plan.name;
    a.kind = n.plan.kind->name;
    a.role = to_string(n.plan.kind->role);
    a.replicas = static_cast<uint32_t>(n.plan.replicas.size());
    a.placement = n.plan.placement;
    for (const auto& t : n.tickets) a.in_flight += t.size();
    a.state = state == "running"    ? (a.in_flight > 0 ? "busy" : "idle")
              : state == "finished" ? "done"
                                    : "failed";
    v.actors.push_back(std::move(a));
  }
  for (const auto& e : st.edges) {
    live_edge le;
    le.from = st.nodes[e.plan.from].plan.name + "." + e.plan.from_port;
    le.to = st.nodes[e.plan.to].plan.name + "." + e.plan.to_port;
    le.queued = e.queue.size();
    le.in_flight = e.inflight;
    v.actors[e.plan.to].queued += le.queued;
    v.edges.push_back(std::move(le));
  }
  // What the learner's buffer holds (the driver's queue, or the buffer actor).
  if (!v.actors.empty()) v.actors[learner_feed_node(self)].queued += waiting_for_learner(self);
  for (size_t k = 0; k < st.durable.feed.aux_queue.size(); ++k)
    v.actors[st.plan.aux_learners[k]].queued += st.durable.feed.aux_queue[k].size();
  driver_counters c = st.durable.counters;
  c.in_flight = st.flow.live_work.size();
  c.buffered = waiting_for_learner(self);
  v.counters = counter_values(c);
  return v;
}

/// Reports the live view when it is due (or now, when `force`).
void report_live(driver self, bool force, const std::string& state, const std::string& error) {
  auto& st = self->state;
  if (!st.opts.on_live) return;
  auto now = steady::now();
  if (!force && now - st.telemetry.last_live < st.opts.live_interval) return;
  st.telemetry.last_live = now;
  st.opts.on_live(live_view_of(self, state, error));
}

/// The counters with what is in flight and buffered at this moment.
driver_counters counters_now(driver self) {
  auto& st = self->state;
  driver_counters c = st.durable.counters;
  c.in_flight = st.flow.live_work.size();
  c.buffered = waiting_for_learner(self);
  return c;
}

}  // namespace milesrt::runtime::driver_impl
