#include "runtime/driver/driver.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <optional>
#include <fstream>
#include <set>
#include <tuple>

#include <caf/all.hpp>

#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/core/progress.hpp"
#include "runtime/driver/schedule_policy.hpp"
#include "runtime/driver/staleness.hpp"

namespace milesrt::runtime {
namespace {

using steady = std::chrono::steady_clock;

/// An item waiting on an edge, with the account it belongs to: an admitted work item (its origin)
/// or a publication of the learner's outputs.
struct pending {
  envelope item;
  bool publish = false;
  int replica = -1;  ///< a fixed replica (publications go to every replica), or -1: least loaded
};

struct edge_rt {
  edge_plan plan;  ///< capacity resolved: never 0 here
  std::deque<pending> queue;
  uint32_t inflight = 0;
  /// Work items on the edge, queued or in flight: what its capacity bounds (publications are not
  /// counted). Unused on edges into the learner, whose items wait in the driver's buffer.
  uint32_t held = 0;
  uint32_t sending = 0;  ///< of those, in flight
  /// The newest publication sent along this edge: a restarted receiver gets it again first.
  std::optional<envelope> last_publish;
};

/// An outstanding request: how to send it again after its replica was replaced, and what it was.
struct ticket_rt {
  std::function<void()> resend;
  std::string what;  ///< e.g. "process items (item 12)", named when a lost worker ends the run
  /// A work item along an edge (counted as requeued when sent again), or a publication (dropped
  /// on a restart: the replacement gets the newest publication first instead).
  enum { other, work, publication } sort = other;
  std::function<void()> drop;  ///< for publications: release their account
};

struct node_rt {
  node_plan plan;
  std::vector<uint32_t> inflight;
  /// Per replica: outstanding requests (ticket -> how to send it again after a restart).
  std::vector<std::map<uint64_t, ticket_rt>> tickets;
  /// out port -> indices of the edges leaving it
  std::map<std::string, std::vector<size_t>> routes;
};

/// The driver's part of a checkpoint.
struct driver_snapshot {
  uint64_t step = 0, version = 0, next_origin = 1;
  driver_counters counters;
  bool exhausted = false;
  std::vector<envelope> buffer;
  /// The learner's outputs of its last step: sent again on resume, so that every stage holds the
  /// learner's version before new work is admitted.
  std::vector<output> last_publication;
  /// The sources' mix: each one's round-robin credit, and whether it ran out.
  std::vector<double> source_credit;
  std::vector<uint8_t> source_out;
  /// With a buffer actor: the items it held (its own snapshot holds them), and those it dropped.
  uint64_t buffer_held = 0, buffer_dropped = 0;
  /// Per auxiliary learner: the items waiting for their origins' batch, and its version.
  std::vector<std::vector<envelope>> aux_queue;
  std::vector<uint64_t> aux_version;
  /// Whether the graph had a buffer actor (its items are in that actor's state, not above).
  bool buffer_actor = false;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, driver_snapshot& x) {
  return f(caf::meta::type_name("driver_snapshot"), x.step, x.version, x.next_origin, x.counters,
           x.exhausted, x.buffer, x.last_publication, x.source_credit, x.source_out, x.buffer_held, x.buffer_dropped, x.aux_queue, x.aux_version, x.buffer_actor);
}

/// An admission under way: what each source (in plan.sources order) was asked for, and its answer.
struct admission_round {
  std::vector<uint64_t> asked;
  std::vector<std::optional<node_reply>> replies;
  size_t waiting = 0;
};

struct driver_state {
  graph_plan plan;
  driver_options opts;
  std::vector<node_rt> nodes;
  std::vector<edge_rt> edges;

  uint64_t step = 0;       // completed training steps
  uint64_t version = 0;    // the learner's version
  uint64_t published = 0;  // the version whose outputs have been fully routed
  uint64_t next_origin = 1;
  std::map<uint64_t, uint32_t> live_work;  // origin -> envelopes alive (queued or in requests)
  std::set<uint64_t> arrived_origins;      // live origins with an item at the buffer (kept or dropped)
  uint32_t live_publish = 0;
  std::deque<envelope> buffer;  // the learner's items, when the graph has no buffer actor
  uint64_t buffer_held = 0;     // with a buffer actor: the items it holds, as its last answer said
  // Of counters.dropped_stale, what the buffer actor's policy dropped: not the schedule's doing,
  // so it frees room for new work (the schedule's view leaves it out).
  uint64_t buffer_dropped = 0;
  /// Per auxiliary learner (plan.aux_learners order): the items sent to its batch ports, waiting
  /// for the step whose batch holds their origins; and its version.
  std::vector<std::deque<envelope>> aux_queue;
  std::vector<uint64_t> aux_version;
  /// The step under way: its batch, the learners that have not answered, the policy's reply.
  std::vector<envelope> step_batch;
  size_t trains_pending = 0;
  std::optional<train_reply> step_reply;
  std::vector<output> last_publication;
  driver_counters counters;  // in_flight and buffered are filled in by counters_now()
  std::unique_ptr<schedule_policy> policy;  // picked once from plan.schedule

  uint64_t next_ticket = 0;
  uint64_t producing = 0;  // items asked of the sources, not yet answered
  admission_round round;   // while producing > 0
  /// Per source (plan.sources order): its smooth weighted round-robin credit; whether it ran out.
  std::vector<double> source_credit;
  std::vector<uint8_t> source_out;
  bool training = false;
  bool exhausted = false;  // every source ran out
  bool checkpointing = false;
  uint64_t checkpoint_due = 0;  // a step whose checkpoint waits for in-flight work to drain
  bool done = false;
  std::string note;

  steady::time_point step_start = steady::now();
  std::map<std::string, double> busy;
  std::map<std::string, std::pair<double, uint64_t>> metric_sums;
  metric_lists lists;
  steady::time_point last_live{};
  /// Workers whose process went away, awaiting a replacement.
  std::set<std::string> lost_workers;
  std::shared_ptr<void> resume_ask;  ///< resume(): the request of one replica's restore
  /// From the start of a resume until every actor has its state back: nothing else starts.
  bool resuming = false;
};

using driver = caf::stateful_actor<driver_state>*;

bool has_buffer(driver self) { return self->state.plan.buffer != graph_plan::no_buffer; }

/// Where the items bound for the learner go: the buffer actor, or (without one) the learner.
size_t learner_feed(driver self) { return has_buffer(self) ? self->state.plan.buffer : self->state.plan.learner; }

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
int aux_index(driver self, size_t node) {
  const auto& aux = self->state.plan.aux_learners;
  auto it = std::find(aux.begin(), aux.end(), node);
  return it == aux.end() ? -1 : static_cast<int>(it - aux.begin());
}

/// Items waiting for the learner: in the buffer actor, or in the driver's own queue.
uint64_t buffered(driver self) { return has_buffer(self) ? self->state.buffer_held : self->state.buffer.size(); }

void finish(driver self, bool ok, const std::string& error);
void admit(driver self);
void try_train(driver self);
void dispatch(driver self, size_t edge_index);
void maybe_checkpoint_or_finish(driver self);

std::string describe_error(driver self, const caf::error& err) {
  return self->system().render(err);
}

double seconds_since(steady::time_point t0) {
  return std::chrono::duration<double>(steady::now() - t0).count();
}

void add_metrics(driver self, const metric_map& m, const metric_lists& lists = {}) {
  for (const auto& [k, v] : m) {
    auto& s = self->state.metric_sums[k];
    s.first += v;
    s.second += 1;
  }
  for (const auto& [k, v] : lists) {
    auto& to = self->state.lists[k];
    to.insert(to.end(), v.begin(), v.end());
  }
}

bool quiescent(driver self) {
  auto& st = self->state;
  return st.live_work.empty() && st.live_publish == 0 && st.producing == 0 && !st.training;
}

uint64_t open_ticket(driver self, size_t node, uint32_t replica, std::function<void()> resend,
                     std::string what = "", decltype(ticket_rt::sort) sort = ticket_rt::other,
                     std::function<void()> drop = nullptr) {
  uint64_t t = ++self->state.next_ticket;
  self->state.nodes[node].tickets[replica][t] = {std::move(resend), std::move(what), sort, std::move(drop)};
  return t;
}

/// The actor's replicas are unreachable until their lost worker is replaced.
bool unavailable(driver self, size_t node) {
  const auto& placement = self->state.nodes[node].plan.placement;
  return !placement.empty() && self->state.lost_workers.count(placement) > 0;
}

/// Closes a ticket when its answer arrives; false when the request was abandoned because its
/// replica died and was restarted (the request was then sent again).
bool close_ticket(driver self, size_t node, uint32_t replica, uint64_t ticket) {
  return self->state.nodes[node].tickets[replica].erase(ticket) > 0;
}

/// A request failed. A dead replica of a restartable kind is restarted by the down handler, which
/// sends its open requests again; anything else ends the run with a message naming who waited
/// for whom, on which message.
void request_failed(driver self, size_t node, uint32_t replica, uint64_t ticket,
                    const std::string& waiting, const std::string& message,
                    const caf::error& err) {
  auto& st = self->state;
  if (st.done) return;
  auto& n = st.nodes[node];
  if (n.tickets[replica].count(ticket) == 0) return;  // abandoned: sent again after a restart
  if (err == caf::sec::request_receiver_down && n.plan.kind->restartable && n.plan.respawn) return;
  if (unavailable(self, node)) return;  // sent again to the lost worker's replacement
  // An actor on a worker: its down message says whether its process went away (then it is
  // awaited) or the actor alone died; that handler decides.
  if (err == caf::sec::request_receiver_down && !n.plan.placement.empty()) return;
  close_ticket(self, node, replica, ticket);
  const std::string who = "actor '" + n.plan.name + "' (replica " + std::to_string(replica) +
                          ", kind " + n.plan.kind->name +
                          (n.plan.placement.empty() ? "" : ", on worker '" + n.plan.placement + "'") + ")";
  if (err == caf::sec::request_timeout) {
    char secs[32];
    std::snprintf(secs, sizeof secs, "%g", n.plan.deadline.count() / 1000.0);
    finish(self, false,
           std::string("deadline of ") + secs + " s passed: " + waiting + " waited for " + who +
               " to answer '" + message + "'");
    return;
  }
  finish(self, false,
         who + " failed while " + waiting + " waited for '" + message + "': " +
             describe_error(self, err));
}

uint32_t pick_replica(driver self, size_t node) {
  auto& n = self->state.nodes[node];
  uint32_t best = 0;
  for (uint32_t r = 1; r < n.inflight.size(); ++r)
    if (n.inflight[r] < n.inflight[best]) best = r;
  return best;
}

/// Work requests sent to `node` and not answered yet.
uint64_t outstanding_work(driver self, size_t node) {
  uint64_t n = 0;
  for (const auto& e : self->state.edges)
    if (e.plan.to == node) n += e.sending;
  return n;
}

/// Whether `node` may be sent `extra` more work items: every edge it feeds keeps room for one
/// output of each item it holds and of the new ones, so that what it answers always fits. Edges
/// into the learner (or its buffer actor) are bounded at admission instead (admission_room).
bool has_room(driver self, size_t node, uint64_t extra) {
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

/// How many new items fit: in each edge the source feeds, and in the learner's buffer, where every
/// item admitted and not yet trained may end up (so a full buffer holds new work at the source,
/// and work already admitted can always drain into it).
uint64_t admission_room(driver self) {
  auto& st = self->state;
  const uint64_t open = st.live_work.size() + st.producing + buffered(self);
  const size_t feed = learner_feed(self);
  uint64_t room = UINT64_MAX;
  for (const auto& e : st.edges) {
    if (e.plan.to == feed && feeds_batches(self, e.plan)) {
      room = std::min<uint64_t>(room, e.plan.capacity > open ? e.plan.capacity - open : 0);
    } else if (std::find(st.plan.sources.begin(), st.plan.sources.end(), e.plan.from) != st.plan.sources.end()) {
      room = std::min<uint64_t>(room, e.plan.capacity > e.held ? e.plan.capacity - e.held : 0);
    }
  }
  return room;
}

void release(driver self, const pending& p) {
  auto& st = self->state;
  if (p.publish) {
    if (--st.live_publish == 0) st.published = st.version;
    return;
  }
  auto it = st.live_work.find(p.item.origin);
  if (it == st.live_work.end()) return;
  if (--it->second == 0) {
    if (st.arrived_origins.erase(p.item.origin) == 0) st.counters.filtered++;
    st.live_work.erase(it);
  }
}

void after_progress(driver self);

/// Sends `item` to the buffer actor's `port`; the item stays in flight until the buffer answers.
void put_into_buffer(driver self, const envelope& item, const std::string& port) {
  auto& st = self->state;
  const size_t b = st.plan.buffer;
  auto t0 = steady::now();
  const std::string message = "put " + port + " (item " + std::to_string(item.origin) + ")";
  uint64_t ticket = open_ticket(self, b, 0, [=] { put_into_buffer(self, item, port); }, message, ticket_rt::work);
  self->request(st.nodes[b].plan.replicas[0], st.nodes[b].plan.deadline, put_atom::value, port, item, st.version)
      .then(
          [=](buffer_reply& reply) {
            auto& s = self->state;
            if (s.done || !close_ticket(self, b, 0, ticket)) return;
            s.busy[s.nodes[b].plan.name] += seconds_since(t0);
            add_metrics(self, reply.metrics);
            s.buffer_held = reply.size;
            s.counters.accepted += reply.kept;
            s.counters.dropped_stale += reply.dropped_stale;
            s.buffer_dropped += reply.dropped_stale;
            release(self, {item, false});
            after_progress(self);
          },
          [=](caf::error& err) {
            request_failed(self, b, 0, ticket, "the driver, routing item " + std::to_string(item.origin) + " to the buffer,",
                           message, err);
          });
}

/// An item reaches the learner's buffer (the driver's queue or the buffer actor); the schedule
/// keeps it or drops it as stale, then the buffer actor's policy may.
void accept(driver self, const envelope& item, const std::string& port) {
  auto& st = self->state;
  st.arrived_origins.insert(item.origin);
  if (st.policy->on_arrival(st.version, item.min_version) == arrival_verdict::drop_stale) {
    st.counters.dropped_stale++;
    return;
  }
  if (has_buffer(self)) {
    st.live_work[item.origin]++;  // released when the buffer has answered
    put_into_buffer(self, item, port);
    return;
  }
  st.counters.accepted++;
  st.buffer.push_back(item);
}

/// Sends each output along the edges leaving its port; items for the learner go to the buffer.
void route(driver self, size_t node, std::vector<output>& outputs, bool publish) {
  auto& st = self->state;
  for (auto& out : outputs) {
    auto r = st.nodes[node].routes.find(out.port);
    if (r == st.nodes[node].routes.end()) continue;  // an unconnected output port
    for (size_t e : r->second) {
      auto& edge = st.edges[e];
      if (!publish && feeds_batches(self, edge.plan)) {
        if (edge.plan.to == learner_feed(self)) {
          accept(self, out.item, edge.plan.to_port);
        } else if (int k = aux_index(self, edge.plan.to); k >= 0) {
          st.aux_queue[size_t(k)].push_back(out.item);
        }
        continue;
      }
      if (publish) {
        // Every replica of the receiver must hold the new version.
        edge.last_publish = out.item;
        auto replicas = st.nodes[edge.plan.to].plan.replicas.size();
        for (size_t r = 0; r < replicas; ++r) {
          st.live_publish++;
          edge.queue.push_back({out.item, true, static_cast<int>(r)});
        }
      } else {
        st.live_work[out.item.origin]++;
        edge.held++;
        edge.queue.push_back({out.item, false, -1});
      }
      dispatch(self, e);
    }
  }
}

/// The graph's actors and queues now, for the live page and Prometheus.
live_view live_view_of(driver self, const std::string& state, const std::string& error) {
  auto& st = self->state;
  live_view v;
  v.graph = st.plan.graph_name;
  v.state = state;
  v.error = error;
  v.step = st.step;
  v.steps = st.plan.steps;
  v.version = st.version;
  v.published = st.published;
  v.wall_time = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  for (size_t i = 0; i < st.nodes.size(); ++i) {
    const auto& n = st.nodes[i];
    live_actor a;
    a.name = n.plan.name;
    a.kind = n.plan.kind->name;
    a.role = to_string(n.plan.kind->role);
    a.replicas = static_cast<uint32_t>(n.plan.replicas.size());
    a.placement = n.plan.placement;
    for (const auto& t : n.tickets) a.in_flight += t.size();
    a.state = state == "running" ? (a.in_flight > 0 ? "busy" : "idle") : state == "finished" ? "done" : "failed";
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
  if (!v.actors.empty()) v.actors[learner_feed(self)].queued += buffered(self);
  for (size_t k = 0; k < st.aux_queue.size(); ++k) v.actors[st.plan.aux_learners[k]].queued += st.aux_queue[k].size();
  driver_counters c = st.counters;
  c.in_flight = st.live_work.size();
  c.buffered = buffered(self);
  v.counters = counter_values(c);
  return v;
}

/// Reports the live view when it is due (or now, when `force`).
void report_live(driver self, bool force, const std::string& state = "running",
                 const std::string& error = "") {
  auto& st = self->state;
  if (!st.opts.on_live) return;
  auto now = steady::now();
  if (!force && now - st.last_live < st.opts.live_interval) return;
  st.last_live = now;
  st.opts.on_live(live_view_of(self, state, error));
}

/// Nothing in flight, no new work admitted, no batch to train, no checkpoint under way and the run
/// not over: no answer will ever come. The run ends naming where it stood instead of hanging.
void check_stall(driver self) {
  auto& st = self->state;
  if (st.done || !quiescent(self) || st.checkpointing || st.checkpoint_due != 0 || !st.lost_workers.empty()) return;
  finish(self, false, "the run stalled after step " + std::to_string(st.step) + " of " + std::to_string(st.plan.steps) +
                          ": nothing is in flight, the schedule admits no new work (" +
                          std::to_string(st.counters.admitted) + " admitted, " + std::to_string(st.counters.accepted) +
                          " accepted, " + std::to_string(st.counters.dropped_stale) + " dropped as stale) and " +
                          (has_buffer(self) ? "actor '" + st.nodes[st.plan.buffer].plan.name + "'" : std::string("the learner's buffer")) +
                          " holds " + std::to_string(buffered(self)) + " of the " + std::to_string(st.plan.batch_size) +
                          " items a batch needs");
}

void after_progress(driver self) {
  if (self->state.done || self->state.resuming) return;
  // Room may have opened downstream of work held on an edge.
  for (size_t e = 0; e < self->state.edges.size(); ++e) dispatch(self, e);
  try_train(self);
  maybe_checkpoint_or_finish(self);
  admit(self);
  check_stall(self);
  if (!self->state.done) report_live(self, false);
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
    auto t0 = steady::now();
    const auto& from = st.nodes[edge.plan.from].plan.name;
    std::string waiting = "the driver, routing " + from + "." + edge.plan.from_port + " -> " +
                          st.nodes[to].plan.name + "." + edge.plan.to_port +
                          (p.publish ? " (publication of version " + std::to_string(st.version) + ")"
                                     : " (item " + std::to_string(p.item.origin) + ")") + ",";
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
        message + (p.publish ? " (publication of version " + std::to_string(st.version) + ")"
                             : " (item " + std::to_string(p.item.origin) + ")"),
        p.publish ? ticket_rt::publication : ticket_rt::work,
        [=] {
          self->state.edges[edge_index].inflight--;
          release(self, p);
        });
    self->request(target, st.nodes[to].plan.deadline, process_atom::value, edge.plan.to_port, p.item)
        .then(
            [=](node_reply& reply) {
              auto& s = self->state;
              if (s.done || !close_ticket(self, to, replica, ticket)) return;
              s.nodes[to].inflight[replica]--;
              s.edges[edge_index].inflight--;
              if (!p.publish) {
                s.edges[edge_index].sending--;
                s.edges[edge_index].held--;
              }
              s.busy[s.nodes[to].plan.name] += seconds_since(t0);
              add_metrics(self, reply.metrics, reply.lists);
              for (auto& o : reply.outputs) {
                o.item.origin = p.item.origin;
                o.item.source = p.item.source;
              }
              route(self, to, reply.outputs, p.publish);
              release(self, p);
              dispatch(self, edge_index);
              after_progress(self);
            },
            [=](caf::error& err) {
              request_failed(self, to, replica, ticket, waiting, message, err);
            });
  }
}

/// What the schedule policy sees of the driver now.
schedule_view view_of(driver self) {
  auto& st = self->state;
  schedule_view v;
  v.batch_size = st.plan.batch_size;
  v.version = st.version;
  v.published = st.published;
  v.in_flight = st.live_work.size();
  v.producing = st.producing;
  v.buffered = buffered(self);
  v.accepted = st.counters.accepted;
  v.dropped_stale = st.counters.dropped_stale - st.buffer_dropped;
  v.quiescent = quiescent(self);
  return v;
}

/// The counters with what is in flight and buffered at this moment.
driver_counters counters_now(driver self) {
  auto& st = self->state;
  driver_counters c = st.counters;
  c.in_flight = st.live_work.size();
  c.buffered = buffered(self);
  return c;
}

/// The names of the sources, quoted: "the source 'data'" or "the sources 'a', 'b'".
std::string sources_named(driver self) {
  const auto& st = self->state;
  std::string names;
  for (size_t i : st.plan.sources) names += (names.empty() ? "'" : ", '") + st.nodes[i].plan.name + "'";
  return (st.plan.sources.size() == 1 ? "the source " : "the sources ") + names;
}

/// Every source has answered its share of the round: the items are numbered and routed source by
/// source in graph order (whatever order the answers came in, so a run repeats itself).
void finish_admission(driver self) {
  auto& st = self->state;
  st.producing = 0;
  admission_round round = std::move(st.round);
  st.round = {};
  std::vector<pending> held;
  bool all_out = true;
  for (size_t i = 0; i < st.plan.sources.size(); ++i) {
    if (round.replies.size() > i && round.replies[i]) {
      auto& reply = *round.replies[i];
      add_metrics(self, reply.metrics, reply.lists);
      if (reply.outputs.size() < round.asked[i]) st.source_out[i] = 1;
      for (auto& o : reply.outputs) {
        o.item.origin = st.next_origin++;
        o.item.source = static_cast<uint32_t>(i);
        st.counters.admitted++;
        // Held while routing, so an item that reaches no edge still counts as filtered.
        st.live_work[o.item.origin]++;
        held.push_back({o.item, false});
      }
      route(self, st.plan.sources[i], reply.outputs, false);
    }
    all_out = all_out && st.source_out[i];
  }
  st.exhausted = all_out;
  for (const auto& p : held) release(self, p);
  after_progress(self);
}

/// Asks source `i` (of plan.sources) for its share of the round.
void produce_from(driver self, size_t i, uint64_t n) {
  auto& st = self->state;
  size_t src = st.plan.sources[i];
  auto target = st.nodes[src].plan.replicas[0];
  auto t0 = steady::now();
  // After a restart of the source the same share is asked of its replacement.
  uint64_t ticket = open_ticket(self, src, 0, [=] { produce_from(self, i, n); }, "produce " + std::to_string(n));
  self->request(target, st.nodes[src].plan.deadline, produce_atom::value, n)
      .then(
          [=](node_reply& reply) {
            auto& s = self->state;
            if (s.done || !close_ticket(self, src, 0, ticket)) return;
            s.busy[s.nodes[src].plan.name] += seconds_since(t0);
            s.round.replies[i] = std::move(reply);
            if (--s.round.waiting == 0) finish_admission(self);
          },
          [=](caf::error& err) {
            request_failed(self, src, 0, ticket,
                           "the driver, admitting " + std::to_string(n) + " new items,",
                           "produce " + std::to_string(n), err);
          });
}

void admit(driver self) {
  auto& st = self->state;
  if (st.done || st.checkpoint_due || st.exhausted || st.producing > 0) return;
  if (st.step >= st.plan.steps) return;
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
    if (!st.source_out[i]) total += st.plan.source_weights[i];
  std::vector<uint64_t> ask(k, 0);
  for (uint64_t j = 0; j < n; ++j) {
    size_t best = k;
    for (size_t i = 0; i < k; ++i) {
      if (st.source_out[i]) continue;
      st.source_credit[i] += st.plan.source_weights[i];
      if (best == k || st.source_credit[i] > st.source_credit[best]) best = i;
    }
    st.source_credit[best] -= total;
    ask[best]++;
  }
  st.producing = n;
  st.round.asked = ask;
  st.round.replies.assign(k, std::nullopt);
  st.round.waiting = 0;
  for (size_t i = 0; i < k; ++i) st.round.waiting += ask[i] > 0 ? 1 : 0;
  for (size_t i = 0; i < k; ++i)
    if (ask[i] > 0) produce_from(self, i, ask[i]);
}

step_record close_step(driver self, const std::vector<envelope>& batch) {
  auto& st = self->state;
  step_record rec;
  rec.step = st.step;
  rec.version = st.version;
  rec.seconds = seconds_since(st.step_start);
  st.step_start = steady::now();
  rec.busy_seconds = std::move(st.busy);
  st.busy.clear();
  for (const auto& e : batch) {
    // The version has already moved past this step: staleness is counted from the one before.
    rec.staleness[staleness(st.version - 1, e.min_version)]++;
    rec.batch_origins.push_back(e.origin);
    if (st.plan.sources.size() > 1 && e.source < st.plan.sources.size())
      rec.batch_sources[st.nodes[st.plan.sources[e.source]].plan.name]++;
  }
  rec.counters = counters_now(self);
  for (const auto& [k, s] : st.metric_sums) rec.metrics[k] = s.first / double(s.second);
  st.metric_sums.clear();
  rec.lists = std::move(st.lists);
  st.lists.clear();
  return rec;
}

/// Takes the learner's next batch from the buffer, keeping what the schedule keeps; empty (and
/// the buffer as it was, less what was dropped) when too few items are fit to train.
std::vector<envelope> take_batch(driver self) {
  auto& st = self->state;
  const uint64_t batch_size = st.plan.batch_size;
  std::vector<envelope> batch;
  while (batch.size() < batch_size && !st.buffer.empty()) {
    envelope e = std::move(st.buffer.front());
    st.buffer.pop_front();
    // The buffer may have held it while the learner moved on.
    switch (st.policy->on_take(st.version, e.min_version)) {
      case take_verdict::keep:
        break;
      case take_verdict::keep_stale:
        st.counters.stale_violations++;
        break;
      case take_verdict::drop_stale:
        // Counted once: no longer accepted, now dropped.
        st.counters.accepted--;
        st.counters.dropped_stale++;
        continue;
    }
    batch.push_back(std::move(e));
  }
  if (batch.size() < batch_size) {
    for (auto it = batch.rbegin(); it != batch.rend(); ++it) st.buffer.push_front(*it);
    return {};
  }
  if (st.policy->discards_surplus()) {
    st.counters.surplus += st.buffer.size();
    st.buffer.clear();
  }
  return batch;
}

void train_on(driver self, std::vector<envelope> batch);

/// Asks the buffer actor for the learner's next batch (the first half of a step).
void take_from_buffer(driver self) {
  auto& st = self->state;
  const size_t b = st.plan.buffer;
  st.training = true;  // nothing else is taken meanwhile
  const uint64_t count = st.plan.batch_size;
  const bool discard_rest = st.policy->discards_surplus();
  const std::string message = "take " + std::to_string(count) + " (for step " + std::to_string(st.step + 1) + ")";
  auto t0 = steady::now();
  uint64_t ticket = open_ticket(self, b, 0, [=] {
    self->state.training = false;
    try_train(self);
  }, message);
  // The schedule's own rule first: with onStale = drop, what went stale while it waited goes, as
  // from the driver's queue; then the buffer's policy.
  const uint64_t drop_past = st.plan.schedule.async && st.plan.schedule.drop_stale ? uint64_t(st.plan.schedule.max_staleness)
                                                                                   : UINT64_MAX;
  self->request(st.nodes[b].plan.replicas[0], st.nodes[b].plan.deadline, take_atom::value, count, st.version,
                discard_rest, drop_past)
      .then(
          [=](buffer_reply& reply) {
            auto& s = self->state;
            if (s.done || !close_ticket(self, b, 0, ticket)) return;
            s.training = false;
            const auto& n = s.nodes[b].plan;
            s.busy[n.name] += seconds_since(t0);
            add_metrics(self, reply.metrics);
            s.buffer_held = reply.size;
            // Counted once: no longer accepted, now dropped (as the driver's own queue counts).
            const uint64_t dropped = std::min<uint64_t>(reply.dropped_stale, s.counters.accepted);
            s.counters.accepted -= dropped;
            s.counters.dropped_stale += dropped;
            s.buffer_dropped += dropped;
            s.counters.surplus += reply.surplus;
            const std::string who = "actor '" + n.name + "' (kind " + n.kind->name + ")";
            if (reply.items.empty()) {
              if (reply.size >= count) {
                // It would be asked again and again: a policy that serves nothing from enough.
                finish(self, false, who + " holds " + std::to_string(reply.size) + " items but served none of the " +
                                        std::to_string(count) + " the learner asked for (" + message + ")");
                return;
              }
              after_progress(self);  // not enough fit to train: wait for more
              return;
            }
            if (reply.items.size() != count) {
              finish(self, false, who + " answered '" + message + "' with " + std::to_string(reply.items.size()) +
                                      " items (a batch is " + std::to_string(count) + ", or none)");
              return;
            }
            for (const auto& e : reply.items)
              if (s.policy->on_take(s.version, e.min_version) != take_verdict::keep) s.counters.stale_violations++;
            train_on(self, std::move(reply.items));
          },
          [=](caf::error& err) {
            request_failed(self, b, 0, ticket, "the driver, taking the learner's batch,", message, err);
          });
}

void try_train(driver self) {
  auto& st = self->state;
  if (st.done || st.training || st.checkpoint_due || st.step >= st.plan.steps) return;
  if (unavailable(self, st.plan.learner)) return;
  if (has_buffer(self) && unavailable(self, st.plan.buffer)) return;
  for (size_t aux : st.plan.aux_learners)
    if (unavailable(self, aux)) return;
  if (!st.policy->batch_ready(view_of(self))) return;
  if (has_buffer(self)) {
    take_from_buffer(self);
    return;
  }
  std::vector<envelope> batch = take_batch(self);
  if (batch.empty()) return;
  train_on(self, std::move(batch));
}

/// Trains the learner on `batch` (taken from the buffer) as step `step + 1`.
/// Every learner of the step has answered: the step is done.
void complete_step(driver self) {
  auto& s = self->state;
  const size_t learner = s.plan.learner;
  train_reply reply = std::move(*s.step_reply);
  s.step_reply.reset();
  std::vector<envelope> batch = std::move(s.step_batch);
  s.step_batch.clear();
  s.training = false;
  s.version = reply.version;
  s.step = s.step + 1;
  add_metrics(self, reply.metrics, reply.lists);
  auto rec = close_step(self, batch);
  s.last_publication = reply.outputs;
  route(self, learner, reply.outputs, true);
  if (s.live_publish == 0) s.published = s.version;
  if (s.plan.checkpoint_interval > 0 && s.step % s.plan.checkpoint_interval == 0) {
    s.checkpoint_due = s.step;
  }
  if (s.opts.on_step) s.opts.on_step(rec);
  report_live(self, true);
  if (!reply.stop.empty()) {
    // The learner ends the run: nothing new is admitted, in-flight work drains.
    s.note = "actor '" + s.nodes[learner].plan.name + "' stopped the run after step " +
             std::to_string(s.step) + ": " + reply.stop;
    s.plan.steps = s.step;
  }
  after_progress(self);
}

/// Sends the policy learner its batch of step `step`.
void train_policy(driver self, uint64_t step, std::vector<envelope> batch) {
  auto& st = self->state;
  const size_t learner = st.plan.learner;
  auto t0 = steady::now();
  const std::string message = "train step " + std::to_string(step) + " (" + std::to_string(batch.size()) + " items)";
  // After a restart of the learner, its replacement gets the same batch.
  uint64_t ticket = open_ticket(self, learner, 0, [=] { train_policy(self, step, batch); }, message);
  self->request(st.nodes[learner].plan.replicas[0], st.nodes[learner].plan.deadline, train_atom::value, step, batch)
      .then(
          [=](train_reply& reply) {
            auto& s = self->state;
            if (s.done || !close_ticket(self, learner, 0, ticket)) return;
            s.busy[s.nodes[learner].plan.name] += seconds_since(t0);
            if (reply.version <= s.version) {
              finish(self, false,
                     "actor '" + s.nodes[learner].plan.name + "' answered '" + message + "' with version " +
                         std::to_string(reply.version) + ", not newer than " + std::to_string(s.version));
              return;
            }
            s.step_reply = std::move(reply);
            if (--s.trains_pending == 0) complete_step(self);
          },
          [=](caf::error& err) { request_failed(self, learner, 0, ticket, "the driver", message, err); });
}

/// Sends auxiliary learner k (of plan.aux_learners) its items of step `step`.
void train_aux(driver self, size_t k, uint64_t step, std::vector<envelope> items) {
  auto& st = self->state;
  const size_t node = st.plan.aux_learners[k];
  auto t0 = steady::now();
  const std::string message = "train step " + std::to_string(step) + " (" + std::to_string(items.size()) + " items)";
  uint64_t ticket = open_ticket(self, node, 0, [=] { train_aux(self, k, step, items); }, message);
  self->request(st.nodes[node].plan.replicas[0], st.nodes[node].plan.deadline, train_atom::value, step, items)
      .then(
          [=](train_reply& reply) {
            auto& s = self->state;
            if (s.done || !close_ticket(self, node, 0, ticket)) return;
            const auto& name = s.nodes[node].plan.name;
            s.busy[name] += seconds_since(t0);
            if (reply.version <= s.aux_version[k]) {
              finish(self, false, "actor '" + name + "' answered '" + message + "' with version " +
                                      std::to_string(reply.version) + ", not newer than " +
                                      std::to_string(s.aux_version[k]));
              return;
            }
            s.aux_version[k] = reply.version;
            add_metrics(self, reply.metrics, reply.lists);
            route(self, node, reply.outputs, true);
            if (!reply.stop.empty()) {
              finish(self, false, "actor '" + name + "' (an auxiliary learner) asked to stop the run after step " +
                                      std::to_string(step) + " (" + reply.stop + "): only the policy learner '" +
                                      s.nodes[s.plan.learner].plan.name + "' ends a run");
              return;
            }
            if (--s.trains_pending == 0) complete_step(self);
          },
          [=](caf::error& err) { request_failed(self, node, 0, ticket, "the driver", message, err); });
}

/// Trains the learners on `batch` (taken from the buffer) as step `step + 1`: the policy learner on
/// the batch, each auxiliary learner on its items of the batch's origins.
void train_on(driver self, std::vector<envelope> batch) {
  auto& st = self->state;
  // Arrival order depends on which replica answered first; the learner sees admission order, so
  // that a step (and a resumed run) trains on the same batch in the same order every time.
  auto by_origin = [](const envelope& a, const envelope& b) { return a.origin < b.origin; };
  std::stable_sort(batch.begin(), batch.end(), by_origin);
  st.training = true;
  const uint64_t next_step = st.step + 1;
  st.step_batch = batch;
  st.step_reply.reset();
  st.trains_pending = 1;
  std::set<uint64_t> in_batch, waiting;
  for (const auto& e : batch) in_batch.insert(e.origin);
  for (const auto& e : st.buffer) waiting.insert(e.origin);
  std::vector<std::pair<size_t, std::vector<envelope>>> aux_batches;
  for (size_t k = 0; k < st.aux_queue.size(); ++k) {
    std::vector<envelope> mine;
    std::deque<envelope> rest;
    for (auto& e : st.aux_queue[k]) {
      if (in_batch.count(e.origin)) {
        mine.push_back(std::move(e));
      } else if (st.live_work.count(e.origin) || waiting.count(e.origin)) {
        rest.push_back(std::move(e));  // its origin may still make a later batch
      }  // else: the policy learner will never train its origin (filtered, dropped, surplus)
    }
    st.aux_queue[k] = std::move(rest);
    std::stable_sort(mine.begin(), mine.end(), by_origin);
    if (!mine.empty()) {
      st.trains_pending++;
      aux_batches.emplace_back(k, std::move(mine));
    }
  }
  train_policy(self, next_step, std::move(batch));
  for (auto& [k, items] : aux_batches) train_aux(self, k, next_step, std::move(items));
}

void shut_down_actors(driver self) {
  for (auto& n : self->state.nodes)
    for (auto& a : n.plan.replicas) self->send_exit(a, caf::exit_reason::user_shutdown);
}

void finish(driver self, bool ok, const std::string& error) {
  auto& st = self->state;
  if (st.done) return;
  st.done = true;
  run_outcome out;
  out.finished = true;
  out.ok = ok;
  out.error = error;
  out.note = st.note;
  out.steps = st.step;
  out.version = st.version;
  out.counters = counters_now(self);
  shut_down_actors(self);
  report_live(self, true, ok ? "finished" : "failed", error);
  if (st.opts.on_finish) st.opts.on_finish(out);
  self->quit();
}

std::vector<uint8_t> serialize_driver(driver self) {
  auto& st = self->state;
  driver_snapshot snap;
  snap.step = st.step;
  snap.version = st.version;
  snap.next_origin = st.next_origin;
  snap.counters = st.counters;
  snap.exhausted = st.exhausted;
  snap.buffer.assign(st.buffer.begin(), st.buffer.end());
  snap.last_publication = st.last_publication;
  snap.source_credit = st.source_credit;
  snap.source_out = st.source_out;
  snap.buffer_held = st.buffer_held;
  snap.buffer_dropped = st.buffer_dropped;
  for (const auto& q : st.aux_queue) snap.aux_queue.emplace_back(q.begin(), q.end());
  snap.aux_version = st.aux_version;
  snap.buffer_actor = has_buffer(self);
  std::vector<char> buf;
  caf::binary_serializer sink{self->system(), buf};
  if (auto err = sink(snap)) {
    throw std::runtime_error("cannot serialize the driver's state: " + describe_error(self, err));
  }
  return {buf.begin(), buf.end()};
}

void restore_driver(driver self, const std::vector<uint8_t>& bytes) {
  driver_snapshot snap;
  std::vector<char> buf(bytes.begin(), bytes.end());
  caf::binary_deserializer source{self->system(), buf};
  if (auto err = source(snap)) {
    throw std::runtime_error("corrupt driver state (or one written by another version of milesrt): " +
                             describe_error(self, err));
  }
  auto& st = self->state;
  st.step = snap.step;
  st.version = snap.version;
  st.published = snap.version;
  st.next_origin = snap.next_origin;
  st.counters = snap.counters;
  st.exhausted = snap.exhausted;
  st.buffer.assign(snap.buffer.begin(), snap.buffer.end());
  st.last_publication = snap.last_publication;
  if (snap.source_credit.size() != st.plan.sources.size() || snap.source_out.size() != st.plan.sources.size()) {
    throw std::runtime_error("the checkpoint was made by a graph with " + std::to_string(snap.source_credit.size()) +
                             " sources, this one has " + std::to_string(st.plan.sources.size()));
  }
  st.source_credit = snap.source_credit;
  st.source_out = snap.source_out;
  if (snap.buffer_actor != has_buffer(self)) {
    throw std::runtime_error(std::string("the checkpoint was made by a graph ") + (snap.buffer_actor ? "with" : "without") +
                             " a buffer actor, this one has " + (has_buffer(self) ? "one" : "none") +
                             ": the learner's items would be lost");
  }
  st.buffer_held = snap.buffer_held;
  st.buffer_dropped = snap.buffer_dropped;
  if (snap.aux_queue.size() != st.plan.aux_learners.size() || snap.aux_version.size() != st.plan.aux_learners.size()) {
    throw std::runtime_error("the checkpoint was made by a graph with " + std::to_string(snap.aux_queue.size() + 1) +
                             " learners, this one has " + std::to_string(st.plan.aux_learners.size() + 1));
  }
  for (size_t k = 0; k < snap.aux_queue.size(); ++k) st.aux_queue[k].assign(snap.aux_queue[k].begin(), snap.aux_queue[k].end());
  st.aux_version = snap.aux_version;
  st.arrived_origins.clear();
}

/// Asks every actor for its state, writes the checkpoint and commits it. Runs only when nothing
/// is in flight, so that no item is lost or duplicated across a resume.
void checkpoint(driver self) {
  auto& st = self->state;
  auto writer = std::make_shared<checkpoint_writer>(st.plan.run_dir, st.step);
  struct progress {
    size_t waiting = 0;
    bool failed = false;
    std::unique_ptr<progress_meter> meter;  // actors' snapshots written
    std::shared_ptr<void> ask;              // the request of one replica's snapshot
  };
  auto prog = std::make_shared<progress>();
  for (size_t i = 0; i < st.nodes.size(); ++i) prog->waiting += st.nodes[i].plan.replicas.size();
  prog->meter = std::make_unique<progress_meter>(
      st.opts.progress, "checkpoint step " + std::to_string(st.step), prog->waiting);
  auto total = prog->waiting;
  auto all_done = [=] {
    auto& s = self->state;
    if (s.done || prog->failed) return;
    try {
      writer->put_bytes("driver.bin", serialize_driver(self));
      writer->commit({{"step", std::to_string(s.step)}, {"version", std::to_string(s.version)},
                      {"graph", s.plan.graph_name}});
    } catch (const std::exception& e) {
      finish(self, false, std::string("checkpoint of step ") + std::to_string(s.step) + ": " + e.what());
      return;
    }
    s.checkpointing = false;
    s.checkpoint_due = 0;
    prog->ask.reset();
    after_progress(self);
  };
  // Asks replica r of node i for its snapshot; a restartable replica that dies meanwhile is
  // replaced, and its replacement is asked instead.
  auto ask = std::make_shared<std::function<void(size_t, uint32_t)>>();
  *ask = [=, weak = std::weak_ptr<std::function<void(size_t, uint32_t)>>(ask)](size_t i, uint32_t r) {
    auto& s = self->state;
    auto target = s.nodes[i].plan.replicas[r];
    std::string key = s.nodes[i].plan.name + "-" + std::to_string(r);
    std::string dir = writer->actor_dir(key).string();
    uint64_t ticket = open_ticket(self, i, r, [=] {
      auto& n = self->state.nodes[i];
      auto again = weak.lock();
      if (n.plan.kind->restartable && again) {
        (*again)(i, r);
        return;
      }
      finish(self, false, "actor '" + key + "' died while writing checkpoint step " +
                              std::to_string(self->state.step));
    }, "snapshot");
    self->request(target, s.nodes[i].plan.deadline, snapshot_atom::value, dir)
        .then(
            [=](actor_state& state) {
              if (self->state.done || prog->failed || !close_ticket(self, i, r, ticket)) return;
              try {
                writer->put_bytes(key + ".state", state.bytes);
              } catch (const std::exception& e) {
                prog->failed = true;
                finish(self, false, std::string("checkpoint: ") + e.what());
                return;
              }
              prog->meter->update(total - --prog->waiting);
              if (prog->waiting == 0) {
                prog->meter->finish();
                all_done();
              }
            },
            [=](caf::error& err) {
              request_failed(self, i, r, ticket,
                             "the driver, checkpointing step " + std::to_string(self->state.step) + ",",
                             "snapshot", err);
            });
  };
  prog->ask = ask;  // kept alive until the checkpoint ends
  for (size_t i = 0; i < st.nodes.size(); ++i)
    for (uint32_t r = 0; r < st.nodes[i].plan.replicas.size(); ++r) (*ask)(i, r);
}

void maybe_checkpoint_or_finish(driver self) {
  auto& st = self->state;
  if (st.done || st.checkpointing || !quiescent(self)) return;
  if (st.checkpoint_due != 0) {
    st.checkpointing = true;
    checkpoint(self);
    return;
  }
  if (st.step >= st.plan.steps) {
    finish(self, true, "");
  } else if (st.exhausted && buffered(self) < st.plan.batch_size) {
    st.note = sources_named(self) + " ran out of items after " +
              std::to_string(st.step) + " of " + std::to_string(st.plan.steps) + " steps";
    finish(self, true, "");
  }
}

/// Restores the driver and every actor from a committed checkpoint, then starts.
void resume(driver self) {
  auto& st = self->state;
  st.resuming = true;
  std::shared_ptr<checkpoint_reader> reader;
  try {
    reader = std::make_shared<checkpoint_reader>(st.opts.resume_dir);
    restore_driver(self, reader->get_bytes("driver.bin"));
  } catch (const std::exception& e) {
    finish(self, false, std::string("cannot resume: ") + e.what());
    return;
  }
  auto waiting = std::make_shared<size_t>(0);
  for (const auto& n : st.nodes) *waiting += n.plan.replicas.size();
  // Restores replica r of node i; a restartable replica that dies meanwhile is replaced, and its
  // replacement gets the state instead.
  auto ask = std::make_shared<std::function<void(size_t, uint32_t, actor_state)>>();
  *ask = [=, weak = std::weak_ptr<std::function<void(size_t, uint32_t, actor_state)>>(ask)](
             size_t i, uint32_t r, actor_state state) {
    auto& s = self->state;
    auto target = s.nodes[i].plan.replicas[r];
    std::string key = s.nodes[i].plan.name + "-" + std::to_string(r);
    uint64_t ticket = open_ticket(self, i, r, [=] {
      auto again = weak.lock();
      if (self->state.nodes[i].plan.kind->restartable && again) {
        (*again)(i, r, state);
        return;
      }
      finish(self, false, "actor '" + key + "' died while restoring its state");
    }, "restore");
    self->request(target, s.nodes[i].plan.deadline, restore_atom::value,
                  reader->actor_dir(key).string(), state)
        .then(
            [=](bool ok) {
              if (self->state.done || !close_ticket(self, i, r, ticket)) return;
              if (!ok) {
                finish(self, false, "cannot resume: actor '" + key + "' refused its state from " +
                                        reader->dir().string());
                return;
              }
              if (--*waiting != 0) return;
              auto& s = self->state;
              s.resuming = false;
              if (!s.last_publication.empty()) {
                // The stages start from the model's files: bring them to the restored version.
                auto outs = s.last_publication;
                route(self, s.plan.learner, outs, true);
                if (s.live_publish == 0) s.published = s.version;
              }
              after_progress(self);
            },
            [=](caf::error& err) {
              request_failed(self, i, r, ticket, "the driver, resuming,", "restore", err);
            });
  };
  std::vector<std::tuple<size_t, uint32_t, actor_state>> states;
  for (size_t i = 0; i < st.nodes.size(); ++i) {
    for (uint32_t r = 0; r < st.nodes[i].plan.replicas.size(); ++r) {
      actor_state state;
      try {
        state.bytes = reader->get_bytes(st.nodes[i].plan.name + "-" + std::to_string(r) + ".state");
      } catch (const std::exception& e) {
        finish(self, false, std::string("cannot resume: ") + e.what());
        return;
      }
      states.emplace_back(i, r, std::move(state));
    }
  }
  st.resume_ask = ask;  // kept alive while the run lasts: a replica may die while restoring
  for (auto& [i, r, state] : states) (*ask)(i, r, state);
}

/// Puts `fresh` in the place of replica r of node i, whose actor died: the new replica first gets
/// the newest publication sent to its predecessor (older ones still queued or in flight are
/// superseded and dropped), then the work its predecessor had not answered (counted as requeued).
void replace_replica(driver self, size_t i, uint32_t r, caf::actor fresh) {
  auto& s = self->state;
  auto& n = s.nodes[i];
  n.plan.replicas[r] = std::move(fresh);
  self->monitor(n.plan.replicas[r]);
  s.counters.restarts++;
  auto open = std::move(n.tickets[r]);
  n.tickets[r].clear();
  n.inflight[r] = 0;
  for (auto& [t, ticket] : open)
    if (ticket.sort == ticket_rt::publication) ticket.drop();
  for (size_t e = 0; e < s.edges.size(); ++e) {
    auto& edge = s.edges[e];
    if (edge.plan.to != i || !edge.last_publish) continue;
    for (auto it = edge.queue.begin(); it != edge.queue.end();) {
      if (it->publish && it->replica == static_cast<int>(r)) {
        pending superseded = *it;
        it = edge.queue.erase(it);
        release(self, superseded);
      } else {
        ++it;
      }
    }
    s.live_publish++;
    edge.queue.push_front({*edge.last_publish, true, static_cast<int>(r)});
    dispatch(self, e);
  }
  for (auto& [t, ticket] : open) {
    if (ticket.sort == ticket_rt::publication) continue;
    if (ticket.sort == ticket_rt::work) s.counters.requeued++;
    ticket.resend();
  }
}

/// What the actors on `worker` were asked and had not answered, for the error that ends the run.
std::string in_flight_on(driver self, const std::string& worker) {
  std::string text;
  size_t count = 0;
  for (const auto& n : self->state.nodes) {
    if (n.plan.placement != worker) continue;
    for (uint32_t r = 0; r < n.tickets.size(); ++r) {
      for (const auto& [t, ticket] : n.tickets[r]) {
        if (++count > 8) continue;
        text += (text.empty() ? "" : ", ") + n.plan.name + "[" + std::to_string(r) + "] '" + ticket.what + "'";
      }
    }
  }
  if (count == 0) return "nothing in flight";
  if (count > 8) text += " and " + std::to_string(count - 8) + " more";
  return "in flight: " + text;
}

/// The actors placed on `worker`: "stage (kind k, replicas 0-1)".
std::string actors_on(driver self, const std::string& worker) {
  std::string text;
  for (const auto& n : self->state.nodes) {
    if (n.plan.placement != worker) continue;
    text += (text.empty() ? "" : ", ") + n.plan.name + " (kind " + n.plan.kind->name +
            (n.plan.replicas.size() == 1 ? ", replica 0)" : ", replicas 0-" + std::to_string(n.plan.replicas.size() - 1) + ")");
  }
  return text;
}

/// The process of `worker` went away (its connection closed): its actors are replaced once a worker
/// of that name joins again within the grace period, or the run fails naming what was lost.
void lose_worker(driver self, const std::string& worker, const caf::node_id& lost) {
  auto& st = self->state;
  std::string cannot;
  for (const auto& n : st.nodes)
    if (n.plan.placement == worker && (!n.plan.kind->restartable || !n.plan.remote_request))
      cannot += (cannot.empty() ? "" : ", ") + n.plan.name + " (kind " + n.plan.kind->name + ")";
  const std::string what = "worker '" + worker + "' went away (its process ended or its connection was lost)";
  if (!cannot.empty()) {
    finish(self, false, what + "; it hosted " + actors_on(self, worker) + "; " + cannot +
                            " cannot be restarted (its kind keeps state that died with it); " +
                            in_flight_on(self, worker));
    return;
  }
  st.lost_workers.insert(worker);
  char secs[32];
  std::snprintf(secs, sizeof secs, "%g", st.plan.worker_grace.count() / 1000.0);
  if (st.opts.progress) {
    std::fprintf(st.opts.progress, "milesrt run: %s; waiting up to %s s for a worker to join as '%s'\n",
                 what.c_str(), secs, worker.c_str());
    std::fflush(st.opts.progress);
  }
  const std::string grace = secs;
  self->request(st.plan.worker_directory, st.plan.worker_grace, rejoin_atom::value, worker, lost)
      .then(
          [=](caf::actor& host) {
            auto& s = self->state;
            if (s.done) return;
            // Spawn every replica of every actor it hosted on the new worker, then put them in place.
            auto spawned = std::make_shared<std::map<std::pair<size_t, uint32_t>, caf::actor>>();
            auto expected = std::make_shared<size_t>(0);
            for (const auto& n : s.nodes)
              if (n.plan.placement == worker) *expected += n.plan.replicas.size();
            for (size_t i = 0; i < s.nodes.size(); ++i) {
              auto& n = s.nodes[i];
              if (n.plan.placement != worker) continue;
              for (uint32_t r = 0; r < n.plan.replicas.size(); ++r) {
                self->request(host, n.plan.deadline, spawn_atom::value, n.plan.remote_request(r))
                    .then(
                        [=](caf::actor& a) {
                          auto& s2 = self->state;
                          if (s2.done) return;
                          (*spawned)[{i, r}] = a;
                          if (spawned->size() < *expected) return;
                          s2.lost_workers.erase(worker);
                          if (s2.opts.progress) {
                            std::fprintf(s2.opts.progress, "milesrt run: worker '%s' joined again; its actors are back\n",
                                         worker.c_str());
                            std::fflush(s2.opts.progress);
                          }
                          for (auto& [where, actor] : *spawned) replace_replica(self, where.first, where.second, actor);
                          for (size_t e = 0; e < s2.edges.size(); ++e) dispatch(self, e);
                          after_progress(self);
                        },
                        [=](caf::error& err) {
                          finish(self, false, "worker '" + worker + "' joined again but could not start actor '" +
                                                  self->state.nodes[i].plan.name + "' (replica " + std::to_string(r) +
                                                  "): " + describe_error(self, err));
                        });
              }
            }
          },
          [=](caf::error& err) {
            finish(self, false, what + " and no worker joined as '" + worker + "' within " + grace +
                                    " s (run.workerGraceSeconds); it hosted " + actors_on(self, worker) + "; " +
                                    in_flight_on(self, worker) +
                                    (err == caf::sec::request_timeout ? "" : " (" + describe_error(self, err) + ")"));
          });
}

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
    st.nodes.push_back(std::move(rt));
  }
  st.source_credit.assign(st.plan.sources.size(), 0.0);
  st.source_out.assign(st.plan.sources.size(), 0);
  st.aux_queue.assign(st.plan.aux_learners.size(), {});
  st.aux_version.assign(st.plan.aux_learners.size(), 0);
  const uint64_t window = schedule_window(st.plan.schedule, st.plan.batch_size);
  for (size_t e = 0; e < st.plan.edges.size(); ++e) {
    auto& cap = st.plan.edges[e].capacity;
    if (cap == 0) cap = static_cast<uint32_t>(std::min<uint64_t>(window, UINT32_MAX));
    st.edges.push_back({st.plan.edges[e], {}, 0, 0, 0, std::nullopt});
    st.nodes[st.plan.edges[e].from].routes[st.plan.edges[e].from_port].push_back(e);
  }
  for (auto& n : st.nodes)
    for (auto& a : n.plan.replicas) self->monitor(a);
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& s = self->state;
    if (s.done) return;
    for (size_t i = 0; i < s.nodes.size(); ++i) {
      auto& n = s.nodes[i];
      for (uint32_t r = 0; r < n.plan.replicas.size(); ++r) {
        if (n.plan.replicas[r].address() != dm.source) continue;
        if (!n.plan.placement.empty() && s.lost_workers.count(n.plan.placement)) return;
        if (dm.reason == caf::exit_reason::remote_link_unreachable && s.plan.worker_directory &&
            s.plan.worker_grace.count() > 0) {
          lose_worker(self, n.plan.placement, dm.source.node());
          return;
        }
        if (n.plan.kind->restartable && n.plan.respawn) {
          caf::actor fresh;
          try {
            fresh = n.plan.respawn(r);
          } catch (const std::exception& e) {
            finish(self, false, "actor '" + n.plan.name + "' (replica " + std::to_string(r) + ", kind " +
                                    n.plan.kind->name + ") died (" + describe_error(self, dm.reason) +
                                    ") and could not be restarted: " + e.what());
            return;
          }
          replace_replica(self, i, r, fresh);
          return;
        }
        finish(self, false,
               "actor '" + n.plan.name + "' (replica " + std::to_string(r) + ", kind " +
                   n.plan.kind->name + (n.plan.placement.empty() ? "" : ", on worker '" + n.plan.placement + "'") +
                   ") died: " + describe_error(self, dm.reason) +
                   (dm.reason == caf::exit_reason::remote_link_unreachable
                        ? " (its worker process went away)"
                        : ""));
        return;
      }
    }
  });
  self->send(self, start_atom::value);
  return {
      [=](start_atom) {
        auto& s = self->state;
        for (const auto& e : s.edges) {
          if (e.plan.to == learner_feed(self) && feeds_batches(self, e.plan) && e.plan.capacity < s.plan.batch_size) {
            // Validation refuses such a graph; a plan made by hand would wait forever.
            finish(self, false, "edge " + s.nodes[e.plan.from].plan.name + "." + e.plan.from_port + " -> " +
                                    s.nodes[e.plan.to].plan.name + "." + e.plan.to_port + ": capacity " +
                                    std::to_string(e.plan.capacity) + " is below the batch size " +
                                    std::to_string(s.plan.batch_size) + ": the learner's buffer could never hold a batch");
            return;
          }
        }
        if (s.plan.buffer != graph_plan::no_buffer && !s.plan.aux_learners.empty()) {
          // Validation refuses such a graph: the driver cannot see which origins the buffer holds.
          finish(self, false, "a graph with a buffer actor drives one learner, this plan has " +
                                  std::to_string(s.plan.aux_learners.size() + 1));
          return;
        }
        self->state.step_start = steady::now();
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

caf::actor spawn_driver(caf::actor_system& sys, graph_plan plan, driver_options options) {
  return sys.spawn(driver_behavior, std::move(plan), std::move(options));
}

}  // namespace milesrt::runtime
