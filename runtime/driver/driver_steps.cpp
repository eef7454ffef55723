// The learners' steps: a batch taken from the learner's feed, trained, and the step closed.
#include <algorithm>
#include <cmath>

#include "runtime/driver/driver_state.hpp"
#include "runtime/driver/staleness.hpp"

namespace milesrt::runtime::driver_impl {

static void train_on(driver self, std::vector<envelope> batch);

/// The mean of `values` summed in ascending order: the same bits whatever order they came in.
static double order_free_mean(std::vector<double>& values) {
  // NaNs last (std::sort needs a strict weak order): a NaN among them makes the mean NaN anyway.
  std::sort(values.begin(), values.end(),
            [](double a, double b) { return std::isnan(b) ? !std::isnan(a) : a < b; });
  double sum = 0;
  for (double v : values) sum += v;
  return values.empty() ? 0.0 : sum / double(values.size());
}

static step_record close_step(driver self, const std::vector<envelope>& batch) {
  auto& st = self->state;
  step_record rec;
  rec.step = st.durable.step;
  rec.version = st.durable.version;
  note_activity(self);
  rec.seconds =
      std::chrono::duration<double>(st.telemetry.activity_since - st.stepping.start).count();
  st.stepping.start = st.telemetry.activity_since;
  rec.busy_seconds = std::move(st.telemetry.busy);
  st.telemetry.busy.clear();
  rec.active_seconds = std::move(st.telemetry.active);
  st.telemetry.active.clear();
  rec.idle_seconds = std::max(0.0, rec.seconds - st.telemetry.any_active);
  st.telemetry.any_active = 0;
  for (const auto& e : batch) {
    // The version has already moved past this step: staleness is counted from the one before.
    rec.staleness[staleness(st.durable.version - 1, e.min_version)]++;
    rec.batch_origins.push_back(e.origin);
    if (st.plan.sources.size() > 1 && e.source < st.plan.sources.size())
      rec.batch_sources[st.nodes[st.plan.sources[e.source]].plan.name]++;
  }
  rec.counters = counters_now(self);
  for (auto& [k, values] : st.telemetry.metric_sums) rec.metrics[k] = order_free_mean(values);
  st.telemetry.metric_sums.clear();
  rec.lists = std::move(st.telemetry.lists);
  st.telemetry.lists.clear();
  for (size_t i = 0; i < st.nodes.size(); ++i) {
    const size_t replicas = st.nodes[i].plan.replicas.size();
    // Only where the driver routes work: not a source, nor a server that only answers its users.
    auto fed = [i](const edge_rt& e) { return e.plan.to == i; };
    if (replicas < 2 || std::none_of(st.edges.begin(), st.edges.end(), fed)) continue;
    auto& items = st.telemetry.replica_items[i];
    items.resize(replicas);
    for (size_t r = 0; r < replicas; ++r)
      rec.metrics[st.nodes[i].plan.name + "_replica_items/" + std::to_string(r)] = double(items[r]);
  }
  st.telemetry.replica_items.clear();
  return rec;
}

/// Takes the learner's next batch from the driver's queue, keeping what the schedule keeps; empty
/// (and the queue as it was, less what was dropped) when too few items are fit to train.
static std::vector<envelope> take_batch(driver self) {
  auto& st = self->state;
  const uint64_t batch_size = st.plan.batch_size;
  std::vector<envelope> batch;
  while (batch.size() < batch_size && !st.durable.feed.queue.empty()) {
    envelope e = std::move(st.durable.feed.queue.front());
    st.durable.feed.queue.pop_front();
    // The queue may have held it while the learner moved on.
    switch (st.policy->on_take(st.durable.version, e.min_version)) {
      case take_verdict::keep:
        break;
      case take_verdict::keep_stale:
        st.durable.counters.stale_violations++;
        break;
      case take_verdict::drop_stale:
        // Counted once: no longer accepted, now dropped.
        st.durable.counters.accepted--;
        st.durable.counters.dropped_stale++;
        continue;
    }
    batch.push_back(std::move(e));
  }
  if (batch.size() < batch_size) {
    for (auto it = batch.rbegin(); it != batch.rend(); ++it) st.durable.feed.queue.push_front(*it);
    return {};
  }
  if (st.policy->discards_surplus()) {
    st.durable.counters.surplus += st.durable.feed.queue.size();
    st.durable.feed.queue.clear();
  }
  return batch;
}

/// Asks the buffer actor for the learner's next batch (the first half of a step).
static void take_from_buffer(driver self) {
  auto& st = self->state;
  const size_t b = st.plan.buffer;
  st.stepping.training = true;  // nothing else is taken meanwhile
  const uint64_t count = st.plan.batch_size;
  const bool discard_rest = st.policy->discards_surplus();
  const std::string message =
      "take " + std::to_string(count) + " (for step " + std::to_string(st.durable.step + 1) + ")";
  const timer t0;
  uint64_t ticket = open_ticket(
      self, b, 0,
      [=] {
        self->state.stepping.training = false;
        try_train(self);
      },
      message);
  // The schedule's own rule first: with onStale = drop, what went stale while it waited goes, as
  // from the driver's queue; then the buffer's policy.
  const uint64_t drop_past = st.plan.schedule.async && st.plan.schedule.drop_stale
                                 ? uint64_t(st.plan.schedule.max_staleness)
                                 : UINT64_MAX;
  self->request(st.nodes[b].plan.replicas[0], st.nodes[b].plan.deadline, take_atom::value, count,
                st.durable.version, discard_rest, drop_past)
      .then(
          [=](buffer_reply& reply) {
            auto& s = self->state;
            if (s.done || !close_ticket(self, b, 0, ticket)) return;
            s.stepping.training = false;
            const auto& n = s.nodes[b].plan;
            s.telemetry.busy[n.name] += t0.seconds();
            add_metrics(self, reply.metrics);
            s.durable.feed.buffer_held = reply.size;
            // Counted once: no longer accepted, now dropped (as the driver's own queue counts).
            const uint64_t dropped =
                std::min<uint64_t>(reply.dropped_stale, s.durable.counters.accepted);
            s.durable.counters.accepted -= dropped;
            s.durable.counters.dropped_stale += dropped;
            s.durable.feed.buffer_dropped += dropped;
            s.durable.counters.surplus += reply.surplus;
            const std::string who = "actor '" + n.name + "' (kind " + n.kind->name + ")";
            if (reply.items.empty()) {
              if (reply.size >= count) {
                // It would be asked again and again: a policy that serves nothing from enough.
                finish(self, false,
                       who + " holds " + std::to_string(reply.size) +
                           " items but served none of the " + std::to_string(count) +
                           " the learner asked for (" + message + ")");
                return;
              }
              after_progress(self);  // not enough fit to train: wait for more
              return;
            }
            if (reply.items.size() != count) {
              finish(self, false,
                     who + " answered '" + message + "' with " +
                         std::to_string(reply.items.size()) + " items (a batch is " +
                         std::to_string(count) + ", or none)");
              return;
            }
            for (const auto& e : reply.items)
              if (s.policy->on_take(s.durable.version, e.min_version) != take_verdict::keep)
                s.durable.counters.stale_violations++;
            train_on(self, std::move(reply.items));
          },
          [=](caf::error& err) {
            request_failed(self, b, 0, ticket, "the driver, taking the learner's batch,", message,
                           err);
          });
}

void try_train(driver self) {
  auto& st = self->state;
  if (st.done || st.stepping.training || st.recovery.checkpoint_due ||
      st.durable.step >= st.plan.steps)
    return;
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

/// Every learner of the step has answered: the step is done.
static void complete_step(driver self) {
  auto& s = self->state;
  const size_t learner = s.plan.learner;
  train_reply reply = std::move(*s.stepping.reply);
  s.stepping.reply.reset();
  std::vector<envelope> batch = std::move(s.stepping.batch);
  s.stepping.batch.clear();
  s.stepping.training = false;
  s.durable.version = reply.version;
  s.durable.step = s.durable.step + 1;
  s.flow.dropped_since_step = 0;
  s.flow.dropped_by.clear();
  s.flow.admitted_at_step = s.durable.counters.admitted;
  add_metrics(self, reply.metrics, reply.lists);
  auto rec = close_step(self, batch);
  s.durable.last_publication = reply.outputs;
  route(self, learner, reply.outputs, true);
  if (s.flow.live_publish == 0) s.flow.published = s.durable.version;
  if (s.plan.checkpoint_interval > 0 && s.durable.step % s.plan.checkpoint_interval == 0) {
    s.recovery.checkpoint_due = s.durable.step;
  }
  if (s.opts.on_step) {
    // A step that cannot be recorded (a full disk, a file-size limit) ends the run.
    try {
      s.opts.on_step(rec);
    } catch (const std::exception& e) {
      finish(self, false, "step " + std::to_string(rec.step) + " was not recorded: " + e.what());
      return;
    }
  }
  report_live(self, true);
  if (!reply.stop.empty()) {
    // The learner ends the run: nothing new is admitted, in-flight work drains.
    s.note = "actor '" + s.nodes[learner].plan.name + "' stopped the run after step " +
             std::to_string(s.durable.step) + ": " + reply.stop;
    s.plan.steps = s.durable.step;
  }
  after_progress(self);
}

/// Sends the policy learner its batch of step `step`.
static void train_policy(driver self, uint64_t step, std::vector<envelope> batch) {
  auto& st = self->state;
  const size_t learner = st.plan.learner;
  const timer t0;
  const std::string message =
      "train step " + std::to_string(step) + " (" + std::to_string(batch.size()) + " items)";
  // After a restart of the learner, its replacement gets the same batch.
  uint64_t ticket = open_ticket(
      self, learner, 0, [=] { train_policy(self, step, batch); }, message);
  self->request(st.nodes[learner].plan.replicas[0], st.nodes[learner].plan.deadline,
                train_atom::value, step, batch)
      .then(
          [=](train_reply& reply) {
            auto& s = self->state;
            if (s.done || !close_ticket(self, learner, 0, ticket)) return;
            s.telemetry.busy[s.nodes[learner].plan.name] += t0.seconds();
            if (reply.version <= s.durable.version) {
              finish(self, false,
                     "actor '" + s.nodes[learner].plan.name + "' answered '" + message +
                         "' with version " + std::to_string(reply.version) + ", not newer than " +
                         std::to_string(s.durable.version));
              return;
            }
            s.stepping.reply = std::move(reply);
            if (--s.stepping.trains_pending == 0) complete_step(self);
          },
          [=](caf::error& err) {
            request_failed(self, learner, 0, ticket, "the driver", message, err);
          });
}

/// Sends auxiliary learner k (of plan.aux_learners) its items of step `step`.
static void train_aux(driver self, size_t k, uint64_t step, std::vector<envelope> items) {
  auto& st = self->state;
  const size_t node = st.plan.aux_learners[k];
  const timer t0;
  const std::string message =
      "train step " + std::to_string(step) + " (" + std::to_string(items.size()) + " items)";
  uint64_t ticket = open_ticket(
      self, node, 0, [=] { train_aux(self, k, step, items); }, message);
  self->request(st.nodes[node].plan.replicas[0], st.nodes[node].plan.deadline, train_atom::value,
                step, items)
      .then(
          [=](train_reply& reply) {
            auto& s = self->state;
            if (s.done || !close_ticket(self, node, 0, ticket)) return;
            const auto& name = s.nodes[node].plan.name;
            s.telemetry.busy[name] += t0.seconds();
            if (reply.version <= s.durable.feed.aux_version[k]) {
              finish(self, false,
                     "actor '" + name + "' answered '" + message + "' with version " +
                         std::to_string(reply.version) + ", not newer than " +
                         std::to_string(s.durable.feed.aux_version[k]));
              return;
            }
            s.durable.feed.aux_version[k] = reply.version;
            add_metrics(self, reply.metrics, reply.lists);
            route(self, node, reply.outputs, true);
            if (!reply.stop.empty()) {
              finish(self, false,
                     "actor '" + name +
                         "' (an auxiliary learner) asked to stop the run after step " +
                         std::to_string(step) + " (" + reply.stop + "): only the policy learner '" +
                         s.nodes[s.plan.learner].plan.name + "' ends a run");
              return;
            }
            if (--s.stepping.trains_pending == 0) complete_step(self);
          },
          [=](caf::error& err) {
            request_failed(self, node, 0, ticket, "the driver", message, err);
          });
}

/// Trains the learners on `batch` (taken from the learner's feed) as step `step + 1`: the policy
/// learner on the batch, each auxiliary learner on its items of the batch's origins.
static void train_on(driver self, std::vector<envelope> batch) {
  auto& st = self->state;
  // Arrival order depends on which replica answered first; the learner sees admission order, so
  // that a step (and a resumed run) trains on the same batch in the same order every time.
  auto by_origin = [](const envelope& a, const envelope& b) { return a.origin < b.origin; };
  std::stable_sort(batch.begin(), batch.end(), by_origin);
  st.stepping.training = true;
  const uint64_t next_step = st.durable.step + 1;
  st.stepping.batch = batch;
  st.stepping.reply.reset();
  st.stepping.trains_pending = 1;
  std::set<uint64_t> in_batch, waiting;
  for (const auto& e : batch) in_batch.insert(e.origin);
  for (const auto& e : st.durable.feed.queue) waiting.insert(e.origin);
  std::vector<std::pair<size_t, std::vector<envelope>>> aux_batches;
  for (size_t k = 0; k < st.durable.feed.aux_queue.size(); ++k) {
    std::vector<envelope> mine;
    std::deque<envelope> rest;
    for (auto& e : st.durable.feed.aux_queue[k]) {
      if (in_batch.count(e.origin)) {
        mine.push_back(std::move(e));
      } else if (st.flow.live_work.count(e.origin) || waiting.count(e.origin)) {
        rest.push_back(std::move(e));  // its origin may still make a later batch
      }  // else: the policy learner will never train its origin (filtered, dropped, surplus)
    }
    st.durable.feed.aux_queue[k] = std::move(rest);
    std::stable_sort(mine.begin(), mine.end(), by_origin);
    if (!mine.empty()) {
      st.stepping.trains_pending++;
      aux_batches.emplace_back(k, std::move(mine));
    }
  }
  train_policy(self, next_step, std::move(batch));
  for (auto& [k, items] : aux_batches) train_aux(self, k, next_step, std::move(items));
}

}  // namespace milesrt::runtime::driver_impl
