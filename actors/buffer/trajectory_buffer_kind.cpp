#include "actors/buffer/trajectory_buffer_kind.hpp"

#include <caf/all.hpp>
#include <cmath>
#include <set>

#include "actors/lib/llm/messages.hpp"
#include "milesrt/buffer.capnp.h"
#include "runtime/core/interfaces.hpp"

namespace milesrt::buffer {
namespace {
using namespace milesrt::runtime;
using llm::sample_group;

/// The population standard deviation of the group's rewards (0 for fewer than two samples).
double reward_spread(const sample_group& g) {
  if (g.samples.size() < 2) return 0;
  double mean = 0;
  for (const auto& s : g.samples) mean += s.reward;
  mean /= double(g.samples.size());
  double var = 0;
  for (const auto& s : g.samples) var += (s.reward - mean) * (s.reward - mean);
  return std::sqrt(var / double(g.samples.size()));
}

struct buffer_state {
  std::string name;
  std::unique_ptr<buffer_policy> policy;
  policy_rules rules;
  std::deque<held_group> held;
  uint64_t next_arrival = 0;
  // Counters over the run (checkpointed): groups put, held, served, discarded as stale, served
  // past maxStaleness, discarded as the schedule's surplus.
  uint64_t put = 0, served = 0, dropped_stale = 0, stale_served = 0, surplus = 0;
};

/// What a snapshot holds: the groups in the order held, and the counters.
struct buffer_snapshot {
  std::string tag = "trajectory-buffer-1";
  std::vector<envelope> items;
  std::vector<uint64_t> arrivals;
  uint64_t next_arrival = 0, put = 0, served = 0, dropped_stale = 0, stale_served = 0, surplus = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, buffer_snapshot& x) {
  return f(caf::meta::type_name("buffer_snapshot"), x.tag, x.items, x.arrivals, x.next_arrival,
           x.put, x.served, x.dropped_stale, x.stale_served, x.surplus);
}

/// What a take reports: the groups held after it (the step's mean is what each take left) and the
/// run's counters.
void add_counters(const buffer_state& st, metric_map& m) {
  m["buffer_size"] = double(st.held.size());
  m["buffer_dropped_stale"] = double(st.dropped_stale);
  m["buffer_stale_served"] = double(st.stale_served);
}

/// A put on port "groups": the group is held when the policy admits it.
caf::result<buffer_reply> put_group(buffer_state& st, const std::string& port, const envelope& e,
                                    uint64_t learner_version) {
  const std::string who = "trajectory_buffer '" + st.name + "'";
  if (port != "groups") {
    return caf::make_error(caf::sec::unexpected_message, who + ": no input port '" + port + "'");
  }
  if (!e.payload.match_elements<sample_group>()) {
    return caf::make_error(caf::sec::unexpected_message,
                           who + ": port 'groups' expects a sample_group");
  }
  held_group g{e, st.next_arrival++, reward_spread(e.payload.get_as<sample_group>(0))};
  st.put++;
  buffer_reply reply;
  if (st.policy->admit(g, learner_version, st.rules)) {
    st.held.push_back(std::move(g));
    reply.kept = 1;
  } else {
    st.dropped_stale++;
    reply.dropped_stale = 1;
  }
  reply.size = st.held.size();
  return reply;
}

/// The schedule's bound (onStale = drop) at a take: what went stale while it waited goes.
void drop_stale_past(buffer_state& st, uint64_t learner_version, uint64_t drop_past,
                     buffer_reply& reply) {
  std::deque<held_group> fresh;
  for (auto& g : st.held) {
    if (staleness_of(g, learner_version) > drop_past) {
      reply.dropped_stale++;
    } else {
      fresh.push_back(std::move(g));
    }
  }
  st.held = std::move(fresh);
  st.dropped_stale += reply.dropped_stale;
}

/// A take: the schedule's bound, then the policy's choice (served, discarded, kept), and with
/// `discard_rest` the surplus of a served batch.
caf::result<buffer_reply> take_groups(buffer_state& st, uint64_t count, uint64_t learner_version,
                                      bool discard_rest, uint64_t drop_past) {
  buffer_reply reply;
  // The schedule's bound first (onStale = drop): what went stale while it waited goes.
  if (drop_past != UINT64_MAX) drop_stale_past(st, learner_version, drop_past, reply);
  choice c = st.policy->choose(st.held, count, learner_version, st.rules);
  // A policy (maybe a plugin's) names each held group at most once.
  std::set<size_t> named;
  for (size_t i : c.serve)
    if (i >= st.held.size() || !named.insert(i).second)
      return caf::make_error(caf::sec::runtime_error,
                             "trajectory_buffer '" + st.name + "': its policy chose group index " +
                                 std::to_string(i) + " of " + std::to_string(st.held.size()) +
                                 " twice or out of range");
  for (size_t i : c.drop)
    if (i >= st.held.size() || !named.insert(i).second)
      return caf::make_error(caf::sec::runtime_error, "trajectory_buffer '" + st.name +
                                                          "': its policy discarded group index " +
                                                          std::to_string(i) + " of " +
                                                          std::to_string(st.held.size()) +
                                                          " twice, out of range or also served");
  const bool serving = c.serve.size() >= count;
  std::vector<bool> gone(st.held.size(), false);
  for (size_t i : c.drop) gone[i] = true;
  reply.dropped_stale += c.drop.size();
  st.dropped_stale += c.drop.size();
  if (serving) {
    double stale_sum = 0, spread_sum = 0;
    for (size_t i : c.serve) {
      reply.items.push_back(st.held[i].item);
      stale_sum += double(staleness_of(st.held[i], learner_version));
      spread_sum += st.held[i].reward_spread;
      gone[i] = true;
    }
    st.served += c.serve.size();
    st.stale_served += c.stale_served;
    reply.stale_served = c.stale_served;
    if (!c.serve.empty()) {
      reply.metrics["buffer_served_staleness_mean"] = stale_sum / double(c.serve.size());
      reply.metrics["buffer_served_spread_mean"] = spread_sum / double(c.serve.size());
    }
  }
  std::deque<held_group> rest;
  for (size_t i = 0; i < st.held.size(); ++i)
    if (!gone[i]) rest.push_back(std::move(st.held[i]));
  st.held = std::move(rest);
  if (serving && discard_rest) {
    reply.surplus = st.held.size();
    st.surplus += st.held.size();
    st.held.clear();
  }
  reply.size = st.held.size();
  add_counters(st, reply.metrics);
  return reply;
}

/// The state as a snapshot: the held groups in order, and the counters.
buffer_snapshot snapshot_of(const buffer_state& st) {
  buffer_snapshot snap;
  for (const auto& g : st.held) {
    snap.items.push_back(g.item);
    snap.arrivals.push_back(g.arrival);
  }
  snap.next_arrival = st.next_arrival;
  snap.put = st.put;
  snap.served = st.served;
  snap.dropped_stale = st.dropped_stale;
  snap.stale_served = st.stale_served;
  snap.surplus = st.surplus;
  return snap;
}

/// Takes a snapshot's groups and counters; false when one of its items holds no sample group.
bool restore_from(buffer_state& st, const buffer_snapshot& snap) {
  st.held.clear();
  for (size_t i = 0; i < snap.items.size(); ++i) {
    const auto& e = snap.items[i];
    if (!e.payload.match_elements<sample_group>()) return false;
    st.held.push_back({e, snap.arrivals[i], reward_spread(e.payload.get_as<sample_group>(0))});
  }
  st.next_arrival = snap.next_arrival;
  st.put = snap.put;
  st.served = snap.served;
  st.dropped_stale = snap.dropped_stale;
  st.stale_served = snap.stale_served;
  st.surplus = snap.surplus;
  return true;
}

buffer_actor::behavior_type buffer_fn(buffer_actor::stateful_pointer<buffer_state> self,
                                      std::shared_ptr<buffer_state> init) {
  self->state = std::move(*init);
  return {
      [=](put_atom, const std::string& port, const envelope& e, uint64_t learner_version)
          -> caf::result<buffer_reply> { return put_group(self->state, port, e, learner_version); },
      [=](take_atom, uint64_t count, uint64_t learner_version, bool discard_rest,
          uint64_t drop_past) -> caf::result<buffer_reply> {
        return take_groups(self->state, count, learner_version, discard_rest, drop_past);
      },
      [=](snapshot_atom, const std::string&) -> caf::result<actor_state> {
        buffer_snapshot snap = snapshot_of(self->state);
        std::vector<char> buf;
        caf::binary_serializer sink{self->system(), buf};
        if (auto err = sink(snap)) return err;
        return actor_state{{buf.begin(), buf.end()}};
      },
      [=](restore_atom, const std::string&, const actor_state& state) -> bool {
        buffer_snapshot snap;
        std::vector<char> buf(state.bytes.begin(), state.bytes.end());
        caf::binary_deserializer source{self->system(), buf};
        if (source(snap) || snap.tag != "trajectory-buffer-1" ||
            snap.items.size() != snap.arrivals.size())
          return false;
        return restore_from(self->state, snap);
      },
  };
}

}  // namespace

void register_trajectory_buffer_kind(kind_registry& registry,
                                     std::shared_ptr<const policy_registry> policies) {
  kind_descriptor k;
  k.name = "trajectory_buffer";
  k.summary = "holds scored groups between scoring and learning; its policy picks each batch";
  k.role = role::buffer;
  k.inputs = {{"groups", llm::port_type::scored_group, "a scored group"}};
  k.outputs = {
      {"groups", llm::port_type::scored_group, "the learner's batches, as its policy picks them"}};
  k.params_member = "trajectoryBuffer";
  k.check_params = [policies](capnp::DynamicStruct::Reader r) {
    problem_list problems;
    auto p = r.as<schema::TrajectoryBufferParams>();
    if (auto bad = policies->check(p.getPolicy()); !bad.empty())
      problems.push_back({"policy", bad});
    return problems;
  };
  k.spawn = [policies](caf::actor_system& sys, const actor_setup& s) -> caf::actor {
    auto p = s.params_struct->as<schema::TrajectoryBufferParams>();
    auto init = std::make_shared<buffer_state>();
    init->name = s.name;
    init->policy = policies->make(p.getPolicy());
    init->rules.max_staleness = p.getMaxStaleness();
    init->rules.drop_stale = p.getOnStale() == schema::TrajectoryBufferParams::OnStale::DROP;
    return caf::actor_cast<caf::actor>(sys.spawn(buffer_fn, init));
  };
  registry.add(k);
  registry.add_types(
      [](caf::actor_system_config& cfg) { cfg.add_message_types<caf::id_block::milesrt_llm>(); });
}

}  // namespace milesrt::buffer
