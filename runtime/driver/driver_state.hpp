#pragma once
/// The schedule driver's state and the functions its files share (internal to runtime/driver/).
///
/// The driver is one CAF actor; its code is split by job:
///   driver.cpp             the actor: start, the down handler's dispatch, finish
///   driver_flow.cpp        core dataflow: tickets, routing along edges, admission from the sources
///   driver_steps.cpp       the learners' steps: taking a batch, training, closing a step
///   driver_checkpoint.cpp  checkpoints and resume (the durable state, serialised as it is)
///   driver_recovery.cpp    dead replicas, lost workers, failed requests
///   driver_live.cpp        telemetry: metric sums, the live view
///
/// The state is grouped by the same jobs; `durable` is exactly what a checkpoint holds.

#include <caf/all.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "runtime/core/messages.hpp"
#include "runtime/core/timer.hpp"
#include "runtime/driver/driver.hpp"
#include "runtime/driver/plan.hpp"
#include "runtime/driver/schedule_policy.hpp"

namespace milesrt::runtime::driver_impl {

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
  /// counted). Unused on edges into the learner, whose items wait in the learner's feed.
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
  /// Per replica: when it was restarted (within plan.restart_window); whether its current actor
  /// has answered anything; its deaths in a row before answering anything (start-up failures).
  std::vector<std::deque<steady::time_point>> restarted;
  std::vector<uint8_t> answered;
  std::vector<uint32_t> startup_failures;
};

/// The sources' side of admission that a checkpoint keeps.
struct source_mix {
  uint64_t next_origin = 1;  ///< the origin number of the next admitted item
  bool exhausted = false;    ///< every source ran out
  /// Per source (plan.sources order): its smooth weighted round-robin credit; whether it ran out.
  std::vector<double> credit;
  std::vector<uint8_t> out;
};

/// What waits for the learners.
struct learner_feed {
  std::deque<envelope> queue;  ///< the policy learner's items, when the graph has no buffer actor
  uint64_t buffer_held = 0;    ///< with a buffer actor: the items it holds, as its last answer said
  /// Of counters.dropped_stale, what the buffer actor's policy dropped: not the schedule's doing,
  /// so it frees room for new work (the schedule's view leaves it out).
  uint64_t buffer_dropped = 0;
  /// Per auxiliary learner (plan.aux_learners order): the items sent to its batch ports, waiting
  /// for the step whose batch holds their origins; and its version.
  std::vector<std::deque<envelope>> aux_queue;
  std::vector<uint64_t> aux_version;
  /// Whether the graph has a buffer actor (its items are in that actor's state, not above).
  bool buffer_actor = false;
};

/// The driver's part of a checkpoint, serialised as it is (inspect below).
struct durable_state {
  uint64_t step = 0;         ///< completed training steps
  uint64_t version = 0;      ///< the policy learner's version
  driver_counters counters;  ///< in_flight and buffered are filled in by counters_now()
  /// The learner's outputs of its last step: sent again on resume, so that every stage holds the
  /// learner's version before new work is admitted.
  std::vector<output> last_publication;
  source_mix sources;
  learner_feed feed;
};

/// The field order is the checkpoint format (`driver.bin`): a std::deque is written as the
/// std::vector it was before, so checkpoints of earlier versions read unchanged.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, durable_state& x) {
  return f(caf::meta::type_name("driver_snapshot"), x.step, x.version, x.sources.next_origin,
           x.counters, x.sources.exhausted, x.feed.queue, x.last_publication, x.sources.credit,
           x.sources.out, x.feed.buffer_held, x.feed.buffer_dropped, x.feed.aux_queue,
           x.feed.aux_version, x.feed.buffer_actor);
}

/// An admission under way: what each source (in plan.sources order) was asked for, and its answer.
struct admission_round {
  std::vector<uint64_t> asked;
  std::vector<std::optional<node_reply>> replies;
  size_t waiting = 0;
};

struct admission_state {
  uint64_t producing = 0;  ///< items asked of the sources, not yet answered
  admission_round round;   ///< while producing > 0
};

/// Work alive in the graph, and the requests that carry it.
struct flow_state {
  std::map<uint64_t, uint32_t> live_work;  ///< origin -> envelopes alive (queued or in requests)
  std::set<uint64_t>
      arrived_origins;  ///< live origins with an item at the learner's feed (kept or dropped)
  /// Items dropped by stages since the last step, by the node that dropped them (no_node: lost
  /// with a failed request), and the admitted count when that step ended: the over-sampling
  /// bound (plan.max_over_sampling) is checked against them.
  std::map<size_t, uint64_t> dropped_by;
  uint64_t dropped_since_step = 0, admitted_at_step = 0;
  static constexpr size_t no_node = SIZE_MAX;
  uint32_t live_publish = 0;  ///< publications queued or in flight
  uint64_t published = 0;     ///< the version whose outputs have been fully routed
  uint64_t next_ticket = 0;
};

/// The step under way: its batch, the learners that have not answered, the policy's reply.
struct step_state {
  std::vector<envelope> batch;
  size_t trains_pending = 0;
  std::optional<train_reply> reply;
  bool training = false;
  steady::time_point start = steady::now();
};

struct recovery_state {
  bool checkpointing = false;
  uint64_t checkpoint_due = 0;  ///< a step whose checkpoint waits for in-flight work to drain
  std::set<std::string> lost_workers;  ///< workers whose process went away, awaiting a replacement
  std::shared_ptr<void> resume_ask;    ///< resume(): the request of one replica's restore
  /// From the start of a resume until every actor has its state back: nothing else starts.
  bool resuming = false;
  /// The version a resume restored: no new work is admitted until every stage holds it
  /// (flow.published reaches it), or work would be made with the stages' initial state.
  uint64_t restored_version = 0;
};

struct telemetry_state {
  std::map<std::string, double> busy;  ///< per actor: seconds its requests were outstanding
  /// Per actor: wall seconds of the step during which it had at least one request outstanding
  /// (busy counts each request; this counts the time, however many overlap).
  std::map<std::string, double> active;
  double any_active = 0;                ///< wall seconds of the step during which any actor had one
  steady::time_point activity_since{};  ///< up to when `active` and `any_active` are counted
  /// Per metric, the step's values as the replies brought them; averaged in close_step in sorted
  /// order, so that the mean does not depend on which reply arrived first.
  std::map<std::string, std::vector<double>> metric_sums;
  metric_lists lists;
  /// Per actor with several replicas (node index), per replica: the work items it answered this
  /// step (`<actor>_replica_items/<r>` in the step's metrics: where the router placed them).
  std::map<size_t, std::vector<uint64_t>> replica_items;
  /// The first rejections of the run (summary.json lists them; the log has every one).
  std::vector<rejected_item> rejections;
  static constexpr size_t rejections_kept = 20;
  /// Work items sent to the replica opts.kill_replica names (tests only).
  uint64_t fault_sent = 0;
  steady::time_point last_live{};
};

struct driver_state {
  graph_plan plan;
  driver_options opts;
  std::unique_ptr<schedule_policy> policy;  ///< picked once from plan.schedule
  std::vector<node_rt> nodes;
  std::vector<edge_rt> edges;

  durable_state durable;
  admission_state admission;
  flow_state flow;
  step_state stepping;
  recovery_state recovery;
  telemetry_state telemetry;

  bool done = false;
  std::string note;  ///< why a successful run ended early
};

using driver = caf::stateful_actor<driver_state>*;

inline bool has_buffer(driver self) { return self->state.plan.buffer != graph_plan::no_buffer; }

/// Where the items bound for the learner go: the buffer actor, or (without one) the learner.
inline size_t learner_feed_node(driver self) {
  return has_buffer(self) ? self->state.plan.buffer : self->state.plan.learner;
}

/// Items waiting for the learner: in the buffer actor, or in the driver's own queue.
inline uint64_t waiting_for_learner(driver self) {
  const auto& feed = self->state.durable.feed;
  return has_buffer(self) ? feed.buffer_held : feed.queue.size();
}

// driver.cpp
void finish(driver self, bool ok, const std::string& error);
/// Hands each user of a service the server's replicas (runtime/core/services.hpp): the users of
/// the edges that touch `node` (either end), or of every service edge for all_nodes.
constexpr size_t all_nodes = SIZE_MAX;
void bind_services(driver self, size_t node);

// driver_flow.cpp
bool feeds_batches(driver self, const edge_plan& e);
std::string describe_error(driver self, const caf::error& err);
bool quiescent(driver self);
uint64_t open_ticket(driver self, size_t node, uint32_t replica, std::function<void()> resend,
                     std::string what = "", decltype(ticket_rt::sort) sort = ticket_rt::other,
                     std::function<void()> drop = nullptr);
bool close_ticket(driver self, size_t node, uint32_t replica, uint64_t ticket);
bool unavailable(driver self, size_t node);
void release(driver self, const pending& p, size_t from = flow_state::no_node);
void route(driver self, size_t node, std::vector<output>& outputs, bool publish);
void dispatch(driver self, size_t edge_index);
void after_progress(driver self);
schedule_view view_of(driver self);
std::string sources_named(driver self);

// driver_steps.cpp
void try_train(driver self);

// driver_checkpoint.cpp
void maybe_checkpoint_or_finish(driver self);
void resume(driver self);

// driver_recovery.cpp
void request_failed(driver self, size_t node, uint32_t replica, uint64_t ticket,
                    const std::string& waiting, const std::string& message, const caf::error& err);
/// Whether a stage's error answer to the work item `origin` rejects it as bad input: then it is
/// counted (items_rejected), logged with its reason, and the caller drops it as answered with
/// nothing; false for any other error (request_failed decides).
bool item_rejected(driver self, size_t node, uint32_t replica, uint64_t ticket, uint64_t origin,
                   const caf::error& err);
void on_actor_down(driver self, const caf::down_msg& dm);

// driver_live.cpp
/// Counts the time since the last call into each actor's active seconds, by the requests
/// outstanding now: called before every change of the tickets and when a step closes.
void note_activity(driver self);
void add_metrics(driver self, const metric_map& m, const metric_lists& lists = {});
driver_counters counters_now(driver self);
void report_live(driver self, bool force, const std::string& state = "running",
                 const std::string& error = "");

}  // namespace milesrt::runtime::driver_impl
