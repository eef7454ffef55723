// The driver's core dataflow: tickets, routing along the edges, admission from the sources.
#include <algorithm>

#include "runtime/core/log.hpp"
#include "runtime/driver/driver_state.hpp"

namespace milesrt::runtime::driver_impl {

static void admit(driver self);

/// Whether what edge `e` carries goes into a learner's batches (its buffer actor, or a learner's
/// batch port) rather than being processed item by item.
bool feeds_batches(driver self, const edge_plan& e) {
  auto& st = self->state;
  if (has_buffer(self) && e.to == st.plan.buffer) return true;
  const auto& kind = *st.nodes[e.to].plan.kind;
  if (kind.role != role::learner) return false;
  for (const auto& p : kind.inputs)
    if (p.name == e.to_port) return !p.per_item;
  return true;
}

/// The index of `node` among the auxiliary learners, or -1.
static int aux_index(driver self, size_t node) {
  const auto& aux = self->state.plan.aux_learners;
  auto it = std::find(aux.begin(), aux.end(), node);
  return it == aux.end() ? -1 : static_cast<int>(it - aux.begin());
}

std::string describe_error(driver self, const caf::error& err) {
  return self->system().render(err);
}

bool quiescent(driver self) {
  auto& st = self->state;
  return st.flow.live_work.empty() && st.flow.live_publish == 0 && st.admission.producing == 0 &&
         !st.stepping.training;
}

uint64_t open_ticket(driver self, size_t node, uint32_t replica, std::function<void()> resend,
                     std::string what, decltype(ticket_rt::sort) sort, std::function<void()> drop) {
  note_activity(self);
  uint64_t t = ++self->state.flow.next_ticket;
  self->state.nodes[node].tickets[replica][t] = {std::move(resend), std::move(what), sort,
                                                 std::move(drop)};
  return t;
}

/// The actor's replicas are unreachable until their lost worker is replaced.
bool unavailable(driver self, size_t node) {
  const auto& placement = self->state.nodes[node].plan.placement;
  return !placement.empty() && self->state.recovery.lost_workers.count(placement) > 0;
}

/// Closes a ticket when its answer arrives; false when the request was abandoned because its
/// replica died and was restarted (the request was then sent again).
bool close_ticket(driver self, size_t node, uint32_t replica, uint64_t ticket) {
  auto& n = self->state.nodes[node];
  note_activity(self);
  if (n.tickets[replica].erase(ticket) == 0) return false;
  n.answered[replica] = 1;
  return true;
}

static uint32_t pick_replica(driver self, size_t node) {
  auto& n = self->state.nodes[node];
  uint32_t best = 0;
  for (uint32_t r = 1; r < n.inflight.size(); ++r)
    if (n.inflight[r] < n.inflight[best]) best = r;
  return best;
}

/// Tests only (driver_options::kill_replica): kills the named replica of `node` once it has been
/// sent its `after`-th work item. The kill lands behind that item in its mailbox, so it dies with
/// the item unanswered, and the down handler restarts it as it would after a crash.
static void inject_fault(driver self, size_t node, uint32_t replica) {
  auto& st = self->state;
  const auto& f = st.opts.kill_replica;
  if (!f || f->actor != st.nodes[node].plan.name || f->replica != replica) return;
  if (++st.telemetry.fault_sent != f->after) return;
  log::warn("test fault: killing actor '{}' (replica {}) after its work item {}", f->actor, replica,
            f->after);
  self->send_exit(st.nodes[node].plan.replicas[replica], caf::exit_reason::kill);
}

/// Work requests sent to `node` and not answered yet.
static uint64_t outstanding_work(driver self, size_t node) {
  uint64_t n = 0;
  for (const auto& e : self->state.edges)
    if (e.plan.to == node) n += e.sending;
  return n;
}

/// Whether `node` may be sent `extra` more work items: every edge it feeds keeps room for one
/// output of each item it holds and of the new ones, so that what it answers always fits. Edges
/// into the learner (or its buffer actor) are bounded at admission instead (admission_room).
static bool has_room(driver self, size_t node, uint64_t extra) {
  auto& st = self->state;
  const uint64_t claims = outstanding_work(self, node) + extra;
  for (const auto& [port, edges] : st.nodes[node].routes) {
    for (size_t e : edges) {
      const auto& o = st.edges[e];
      if (!feeds_batches(self, o.plan) && o.held + claims > o.plan.capacity) return false;
    }
  }
  return true;
}

/// How many new items fit: in each edge the source feeds, and in the learner's feed, where every
/// item admitted and not yet trained may end up (so a full feed holds new work at the source,
/// and work already admitted can always drain into it).
static uint64_t admission_room(driver self) {
  auto& st = self->state;
  const uint64_t open =
      st.flow.live_work.size() + st.admission.producing + waiting_for_learner(self);
  const size_t feed = learner_feed_node(self);
  uint64_t room = UINT64_MAX;
  for (const auto& e : st.edges) {
    if (e.plan.to == feed && feeds_batches(self, e.plan)) {
      room = std::min<uint64_t>(room, e.plan.capacity > open ? e.plan.capacity - open : 0);
    } else if (std::find(st.plan.sources.begin(), st.plan.sources.end(), e.plan.from) !=
               st.plan.sources.end()) {
      room = std::min<uint64_t>(room, e.plan.capacity > e.held ? e.plan.capacity - e.held : 0);
    }
  }
  return room;
}

void release(driver self, const pending& p, size_t from) {
  auto& st = self->state;
  if (p.publish) {
    if (--st.flow.live_publish == 0) st.flow.published = st.durable.version;
    return;
  }
  auto it = st.flow.live_work.find(p.item.origin);
  if (it == st.flow.live_work.end()) return;
  if (--it->second == 0) {
    if (st.flow.arrived_origins.erase(p.item.origin) == 0) {
      st.durable.counters.filtered++;
      st.flow.dropped_since_step++;
      st.flow.dropped_by[from]++;
    }
    st.flow.live_work.erase(it);
  }
}

/// Sends `item` to the buffer actor's `port`; the item stays in flight until the buffer answers.
static void put_into_buffer(driver self, const envelope& item, const std::string& port) {
  auto& st = self->state;
  const size_t b = st.plan.buffer;
  const timer t0;
  const std::string message = "put " + port + " (item " + std::to_string(item.origin) + ")";
  uint64_t ticket = open_ticket(
      self, b, 0, [=] { put_into_buffer(self, item, port); }, message, ticket_rt::work);
  self->request(st.nodes[b].plan.replicas[0], st.nodes[b].plan.deadline, put_atom::value, port,
                item, st.durable.version)
      .then(
          [=](buffer_reply& reply) {
            auto& s = self->state;
            if (s.done || !close_ticket(self, b, 0, ticket)) return;
            s.telemetry.busy[s.nodes[b].plan.name] += t0.seconds();
            add_metrics(self, reply.metrics);
            s.durable.feed.buffer_held = reply.size;
            s.durable.counters.accepted += reply.kept;
            s.durable.counters.dropped_stale += reply.dropped_stale;
            s.durable.feed.buffer_dropped += reply.dropped_stale;
            release(self, {item, false});
            after_progress(self);
          },
          [=](caf::error& err) {
            request_failed(
                self, b, 0, ticket,
                "the driver, routing item " + std::to_string(item.origin) + " to the buffer,",
                message, err);
          });
}

/// An item reaches the learner's buffer (the driver's queue or the buffer actor); the schedule
/// keeps it or drops it as stale, then the buffer actor's policy may.
static void accept(driver self, const envelope& item, const std::string& port) {
  auto& st = self->state;
  st.flow.arrived_origins.insert(item.origin);
  if (st.policy->on_arrival(st.durable.version, item.min_version) == arrival_verdict::drop_stale) {
    st.durable.counters.dropped_stale++;
    return;
  }
  if (has_buffer(self)) {
    st.flow.live_work[item.origin]++;  // released when the buffer has answered
    put_into_buffer(self, item, port);
    return;
  }
  st.durable.counters.accepted++;
  st.durable.feed.queue.push_back(item);
}

/// Sends each output along the edges leaving its port; items for the learner go to its feed.
void route(driver self, size_t node, std::vector<output>& outputs, bool publish) {
  auto& st = self->state;
  for (auto& out : outputs) {
    auto r = st.nodes[node].routes.find(out.port);
    if (r == st.nodes[node].routes.end()) continue;  // an unconnected output port
    for (size_t e : r->second) {
      auto& edge = st.edges[e];
      if (!publish && feeds_batches(self, edge.plan)) {
        if (edge.plan.to == learner_feed_node(self)) {
          accept(self, out.item, edge.plan.to_port);
        } else if (int k = aux_index(self, edge.plan.to); k >= 0) {
          st.durable.feed.aux_queue[size_t(k)].push_back(out.item);
        }
        continue;
      }
      if (publish) {
        // Every replica of the receiver must hold the new version.
        edge.last_publish = out.item;
        auto replicas = st.nodes[edge.plan.to].plan.replicas.size();
        for (size_t r = 0; r < replicas; ++r) {
          st.flow.live_publish++;
          edge.queue.push_back({out.item, true, static_cast<int>(r)});
        }
      } else {
        st.flow.live_work[out.item.origin]++;
        edge.held++;
        edge.queue.push_back({out.item, false, -1});
      }
      dispatch(self, e);
    }
  }
}

/// Nothing in flight, no new work admitted, no batch to train, no checkpoint under way and the run
/// not over: no answer will ever come. The run ends naming where it stood instead of hanging.
static void check_stall(driver self) {
  auto& st = self->state;
  if (st.done || !quiescent(self) || st.recovery.checkpointing || st.recovery.checkpoint_due != 0 ||
      !st.recovery.lost_workers.empty())
    return;
  finish(self, false,
         "the run stalled after step " + std::to_string(st.durable.step) + " of " +
             std::to_string(st.plan.steps) +
             ": nothing is in flight, the schedule admits no new work (" +
             std::to_string(st.durable.counters.admitted) + " admitted, " +
             std::to_string(st.durable.counters.accepted) + " accepted, " +
             std::to_string(st.durable.counters.dropped_stale) + " dropped as stale) and " +
             (has_buffer(self) ? "actor '" + st.nodes[st.plan.buffer].plan.name + "'"
                               : std::string("the learner's buffer")) +
             " holds " + std::to_string(waiting_for_learner(self)) + " of the " +
             std::to_string(st.plan.batch_size) + " items a batch needs");
}

/// More items dropped since the last step than run.maxOverSampling x batchSize: the stages drop
/// (nearly) everything, and admitting more would go on for ever without a step or a word. The run
/// ends naming the actors that dropped and the counts.
static bool over_sampled(driver self) {
  auto& st = self->state;
  const uint64_t bound = uint64_t(st.plan.max_over_sampling) * st.plan.batch_size;
  if (bound == 0 || st.flow.dropped_since_step <= bound) return false;
  std::string who;
  for (const auto& [node, n] : st.flow.dropped_by) {
    who += who.empty() ? "" : ", ";
    who += node == flow_state::no_node
               ? std::to_string(n) + " lost with failed requests"
               : "actor '" + st.nodes[node].plan.name + "' (kind " +
                     st.nodes[node].plan.kind->name + ") dropped " + std::to_string(n);
  }
  finish(self, false,
         "step " + std::to_string(st.durable.step + 1) + " of " + std::to_string(st.plan.steps) +
             ": " + std::to_string(st.flow.dropped_since_step) + " of the " +
             std::to_string(st.durable.counters.admitted - st.flow.admitted_at_step) +
             " items admitted since step " + std::to_string(st.durable.step) +
             " were dropped on the way to the learner (" + who +
             "), more than run.maxOverSampling x run.batchSize = " +
             std::to_string(st.plan.max_over_sampling) + " x " +
             std::to_string(st.plan.batch_size) + "; the learner's buffer holds " +
             std::to_string(waiting_for_learner(self)) + " of the " +
             std::to_string(st.plan.batch_size) + " items a batch needs");
  return true;
}

void after_progress(driver self) {
  if (self->state.done || self->state.recovery.resuming) return;
  if (over_sampled(self)) return;
  // Room may have opened downstream of work held on an edge.
  for (size_t e = 0; e < self->state.edges.size(); ++e) dispatch(self, e);
  try_train(self);
  maybe_checkpoint_or_finish(self);
  admit(self);
  check_stall(self);
  if (!self->state.done) report_live(self, false);
}

/// Replica `replica` of edge `edge_index`'s receiver answered `p` with `reply` (a rejected item
/// is answered with nothing): its outputs are routed on and its account released.
static void item_answered(driver self, size_t edge_index, uint32_t replica, uint64_t ticket,
                          const pending& p, const timer& t0, node_reply& reply) {
  auto& s = self->state;
  const size_t to = s.edges[edge_index].plan.to;
  if (s.done || !close_ticket(self, to, replica, ticket)) return;
  s.nodes[to].inflight[replica]--;
  s.edges[edge_index].inflight--;
  if (!p.publish) {
    s.edges[edge_index].sending--;
    s.edges[edge_index].held--;
    if (s.nodes[to].plan.replicas.size() > 1) {
      auto& items = s.telemetry.replica_items[to];
      items.resize(s.nodes[to].plan.replicas.size());
      items[replica]++;
    }
  }
  s.telemetry.busy[s.nodes[to].plan.name] += t0.seconds();
  add_metrics(self, reply.metrics, reply.lists);
  for (auto& o : reply.outputs) {
    o.item.origin = p.item.origin;
    o.item.source = p.item.source;
  }
  route(self, to, reply.outputs, p.publish);
  release(self, p, to);
  dispatch(self, edge_index);
  after_progress(self);
}

void dispatch(driver self, size_t edge_index) {
  auto& st = self->state;
  auto& edge = st.edges[edge_index];
  if (unavailable(self, edge.plan.to)) return;  // queued until the lost worker is replaced
  while (!edge.queue.empty()) {
    // A work item waits (first in, first out) until its receiver has room for what it will emit.
    if (!edge.queue.front().publish && !has_room(self, edge.plan.to, 1)) return;
    pending p = std::move(edge.queue.front());
    edge.queue.pop_front();
    if (!p.publish) edge.sending++;
    size_t to = edge.plan.to;
    uint32_t replica = p.replica >= 0 ? static_cast<uint32_t>(p.replica) : pick_replica(self, to);
    auto target = st.nodes[to].plan.replicas[replica];
    st.nodes[to].inflight[replica]++;
    edge.inflight++;
    const timer t0;
    const auto& from = st.nodes[edge.plan.from].plan.name;
    std::string waiting =
        "the driver, routing " + from + "." + edge.plan.from_port + " -> " +
        st.nodes[to].plan.name + "." + edge.plan.to_port +
        (p.publish ? " (publication of version " + std::to_string(st.durable.version) + ")"
                   : " (item " + std::to_string(p.item.origin) + ")") +
        ",";
    std::string message = "process " + edge.plan.to_port;
    uint64_t ticket = open_ticket(
        self, to, replica,
        [=] {
          auto& s = self->state;
          s.edges[edge_index].inflight--;
          if (!p.publish) s.edges[edge_index].sending--;
          s.edges[edge_index].queue.push_front(p);
          dispatch(self, edge_index);
        },
        message + (p.publish
                       ? " (publication of version " + std::to_string(st.durable.version) + ")"
                       : " (item " + std::to_string(p.item.origin) + ")"),
        p.publish ? ticket_rt::publication : ticket_rt::work,
        [=] {
          self->state.edges[edge_index].inflight--;
          release(self, p);
        });
    self->request(target, st.nodes[to].plan.deadline, process_atom::value, edge.plan.to_port,
                  p.item)
        .then(
            [=](node_reply& reply) {
              item_answered(self, edge_index, replica, ticket, p, t0, reply);
            },
            [=](caf::error& err) {
              if (!p.publish && item_rejected(self, to, replica, ticket, p.item.origin, err)) {
                node_reply none;
                item_answered(self, edge_index, replica, ticket, p, t0, none);
                return;
              }
              request_failed(self, to, replica, ticket, waiting, message, err);
            });
    if (!p.publish) inject_fault(self, to, replica);
  }
}

/// What the schedule policy sees of the driver now.
schedule_view view_of(driver self) {
  auto& st = self->state;
  schedule_view v;
  v.batch_size = st.plan.batch_size;
  v.version = st.durable.version;
  v.published = st.flow.published;
  v.in_flight = st.flow.live_work.size();
  v.producing = st.admission.producing;
  v.buffered = waiting_for_learner(self);
  v.accepted = st.durable.counters.accepted;
  v.dropped_stale = st.durable.counters.dropped_stale - st.durable.feed.buffer_dropped;
  v.quiescent = quiescent(self);
  return v;
}

/// The names of the sources, quoted: "the source 'data'" or "the sources 'a', 'b'".
std::string sources_named(driver self) {
  const auto& st = self->state;
  std::string names;
  for (size_t i : st.plan.sources)
    names += (names.empty() ? "'" : ", '") + st.nodes[i].plan.name + "'";
  return (st.plan.sources.size() == 1 ? "the source " : "the sources ") + names;
}

/// Every source has answered its share of the round: the items are numbered and routed source by
/// source in graph order (whatever order the answers came in, so a run repeats itself).
static void finish_admission(driver self) {
  auto& st = self->state;
  st.admission.producing = 0;
  admission_round round = std::move(st.admission.round);
  st.admission.round = {};
  std::vector<pending> held;
  bool all_out = true;
  for (size_t i = 0; i < st.plan.sources.size(); ++i) {
    if (round.replies.size() > i && round.replies[i]) {
      auto& reply = *round.replies[i];
      add_metrics(self, reply.metrics, reply.lists);
      if (reply.outputs.size() < round.asked[i]) st.durable.sources.out[i] = 1;
      for (auto& o : reply.outputs) {
        o.item.origin = st.durable.sources.next_origin++;
        o.item.source = static_cast<uint32_t>(i);
        st.durable.counters.admitted++;
        // Held while routing, so an item that reaches no edge still counts as filtered.
        st.flow.live_work[o.item.origin]++;
        held.push_back({o.item, false});
      }
      route(self, st.plan.sources[i], reply.outputs, false);
    }
    all_out = all_out && st.durable.sources.out[i];
  }
  st.durable.sources.exhausted = all_out;
  for (const auto& p : held) release(self, p, st.plan.sources[p.item.source]);
  after_progress(self);
}

/// Asks source `i` (of plan.sources) for its share of the round.
static void produce_from(driver self, size_t i, uint64_t n) {
  auto& st = self->state;
  size_t src = st.plan.sources[i];
  auto target = st.nodes[src].plan.replicas[0];
  const timer t0;
  // After a restart of the source the same share is asked of its replacement.
  uint64_t ticket = open_ticket(
      self, src, 0, [=] { produce_from(self, i, n); }, "produce " + std::to_string(n));
  self->request(target, st.nodes[src].plan.deadline, produce_atom::value, n)
      .then(
          [=](node_reply& reply) {
            auto& s = self->state;
            if (s.done || !close_ticket(self, src, 0, ticket)) return;
            s.telemetry.busy[s.nodes[src].plan.name] += t0.seconds();
            s.admission.round.replies[i] = std::move(reply);
            if (--s.admission.round.waiting == 0) finish_admission(self);
          },
          [=](caf::error& err) {
            request_failed(self, src, 0, ticket,
                           "the driver, admitting " + std::to_string(n) + " new items,",
                           "produce " + std::to_string(n), err);
          });
}

static void admit(driver self) {
  auto& st = self->state;
  if (st.done || st.recovery.checkpoint_due || st.durable.sources.exhausted ||
      st.admission.producing > 0)
    return;
  if (st.durable.step >= st.plan.steps || st.flow.published < st.recovery.restored_version) return;
  for (size_t src : st.plan.sources)
    if (unavailable(self, src)) return;
  uint64_t n = std::min(st.policy->admissible(view_of(self)), admission_room(self));
  if (n == 0) return;
  // Shared out among the sources that have not run out by a smooth weighted round robin: each item
  // goes to the source with the most credit after every source gained its weight, which then pays
  // the total (over any run of items the shares follow the weights to within one item per source).
  const size_t k = st.plan.sources.size();
  double total = 0;
  for (size_t i = 0; i < k; ++i)
    if (!st.durable.sources.out[i]) total += st.plan.source_weights[i];
  std::vector<uint64_t> ask(k, 0);
  for (uint64_t j = 0; j < n; ++j) {
    size_t best = k;
    for (size_t i = 0; i < k; ++i) {
      if (st.durable.sources.out[i]) continue;
      st.durable.sources.credit[i] += st.plan.source_weights[i];
      if (best == k || st.durable.sources.credit[i] > st.durable.sources.credit[best]) best = i;
    }
    st.durable.sources.credit[best] -= total;
    ask[best]++;
  }
  st.admission.producing = n;
  st.admission.round.asked = ask;
  st.admission.round.replies.assign(k, std::nullopt);
  st.admission.round.waiting = 0;
  for (size_t i = 0; i < k; ++i) st.admission.round.waiting += ask[i] > 0 ? 1 : 0;
  for (size_t i = 0; i < k; ++i)
    if (ask[i] > 0) produce_from(self, i, ask[i]);
}

}  // namespace milesrt::runtime::driver_impl
