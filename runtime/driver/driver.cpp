// The schedule driver as a CAF actor: its start, the down handler's entry and the end of a run.
// The rest of it lives beside this file, one file per job (driver_state.hpp lists them).
#include "runtime/driver/driver.hpp"

#include <algorithm>

#include "runtime/core/services.hpp"
#include "runtime/driver/driver_state.hpp"

namespace milesrt::runtime {
namespace driver_impl {
namespace {

void shut_down_actors(driver self) {
  for (auto& n : self->state.nodes)
    for (auto& a : n.plan.replicas) self->send_exit(a, caf::exit_reason::user_shutdown);
}

}  // namespace

void finish(driver self, bool ok, const std::string& error) {
  auto& st = self->state;
  if (st.done) return;
  st.done = true;
  run_outcome out;
  out.finished = true;
  out.ok = ok;
  out.error = error;
  out.note = st.note;
  out.steps = st.durable.step;
  out.version = st.durable.version;
  out.counters = counters_now(self);
  out.rejected = st.telemetry.rejections;
  shut_down_actors(self);
  report_live(self, true, ok ? "finished" : "failed", error);
  if (st.opts.on_finish) st.opts.on_finish(out);
  self->quit();
}

void bind_services(driver self, size_t node) {
  auto& st = self->state;
  for (const auto& s : st.plan.services) {
    if (node != all_nodes && s.user != node && s.server != node) continue;
    const std::vector<caf::actor>& servers = st.nodes[s.server].plan.replicas;
    for (const auto& user : st.nodes[s.user].plan.replicas)
      if (user) self->send(user, uses_atom::value, s.port, servers);
  }
}

namespace {

using start_atom = caf::atom_constant<caf::atom("start")>;

caf::behavior driver_behavior(driver self, graph_plan plan, driver_options opts) {
  auto& st = self->state;
  st.plan = std::move(plan);
  st.opts = std::move(opts);
  st.policy = make_schedule_policy(st.plan.schedule);
  for (const auto& n : st.plan.nodes) {
    node_rt rt;
    rt.plan = n;
    rt.inflight.assign(n.replicas.size(), 0);
    rt.tickets.resize(n.replicas.size());
    rt.restarted.resize(n.replicas.size());
    rt.answered.assign(n.replicas.size(), 0);
    rt.startup_failures.assign(n.replicas.size(), 0);
    st.nodes.push_back(std::move(rt));
  }
  st.durable.sources.credit.assign(st.plan.sources.size(), 0.0);
  st.durable.sources.out.assign(st.plan.sources.size(), 0);
  st.durable.feed.aux_queue.assign(st.plan.aux_learners.size(), {});
  st.durable.feed.aux_version.assign(st.plan.aux_learners.size(), 0);
  st.durable.feed.buffer_actor = has_buffer(self);
  const uint64_t window = schedule_window(st.plan.schedule, st.plan.batch_size);
  for (size_t e = 0; e < st.plan.edges.size(); ++e) {
    auto& cap = st.plan.edges[e].capacity;
    if (cap == 0) cap = static_cast<uint32_t>(std::min<uint64_t>(window, UINT32_MAX));
    st.edges.push_back({st.plan.edges[e], {}, 0, 0, 0, std::nullopt});
    st.nodes[st.plan.edges[e].from].routes[st.plan.edges[e].from_port].push_back(e);
  }
  for (auto& n : st.nodes)
    for (auto& a : n.plan.replicas) self->monitor(a);
  self->set_down_handler([=](caf::down_msg& dm) { on_actor_down(self, dm); });
  // Before any request of the driver: a user's mailbox holds its servers before its first work.
  bind_services(self, all_nodes);
  self->send(self, start_atom::value);
  return {
      [=](start_atom) {
        auto& s = self->state;
        for (const auto& e : s.edges) {
          if (e.plan.to == learner_feed_node(self) && feeds_batches(self, e.plan) &&
              e.plan.capacity < s.plan.batch_size) {
            // Validation refuses such a graph; a plan made by hand would wait forever.
            finish(self, false,
                   "edge " + s.nodes[e.plan.from].plan.name + "." + e.plan.from_port + " -> " +
                       s.nodes[e.plan.to].plan.name + "." + e.plan.to_port + ": capacity " +
                       std::to_string(e.plan.capacity) + " is below the batch size " +
                       std::to_string(s.plan.batch_size) +
                       ": the learner's buffer could never hold a batch");
            return;
          }
        }
        if (s.plan.buffer != graph_plan::no_buffer && !s.plan.aux_learners.empty()) {
          // Validation refuses such a graph: the driver cannot see which origins the buffer holds.
          finish(self, false,
                 "a graph with a buffer actor drives one learner, this plan has " +
                     std::to_string(s.plan.aux_learners.size() + 1));
          return;
        }
        self->state.stepping.start = steady::now();
        self->state.telemetry.activity_since = self->state.stepping.start;
        report_live(self, true);
        if (self->state.opts.resume) {
          resume(self);
        } else {
          after_progress(self);
        }
      },
  };
}

}  // namespace
}  // namespace driver_impl

std::optional<replica_fault> parse_replica_fault(const std::string& text) {
  const size_t a = text.find(':'), b = text.rfind(':');
  if (a == std::string::npos || a == 0 || b == a) return std::nullopt;
  const std::string replica = text.substr(a + 1, b - a - 1), after = text.substr(b + 1);
  auto digits = [](const std::string& s) {
    return !s.empty() && s.size() < 10 &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!digits(replica) || !digits(after) || std::stoull(after) == 0) return std::nullopt;
  return replica_fault{text.substr(0, a), static_cast<uint32_t>(std::stoul(replica)),
                       std::stoull(after)};
}

caf::actor spawn_driver(caf::actor_system& sys, graph_plan plan, driver_options options) {
  return sys.spawn(driver_impl::driver_behavior, std::move(plan), std::move(options));
}

}  // namespace milesrt::runtime
