// Recovery: failed requests, dead replicas replaced, lost workers awaited.
#include <cstdio>

#include "runtime/core/errors.hpp"
#include "runtime/core/log.hpp"
#include "runtime/driver/driver_state.hpp"

namespace milesrt::runtime::driver_impl {

/// "actor 'x' (replica r, kind k, on worker 'w')"
static std::string actor_named(driver self, size_t node, uint32_t replica) {
  const auto& n = self->state.nodes[node];
  return "actor '" + n.plan.name + "' (replica " + std::to_string(replica) + ", kind " +
         n.plan.kind->name +
         (n.plan.placement.empty() ? "" : ", on worker '" + n.plan.placement + "'") + ")";
}

bool item_rejected(driver self, size_t node, uint32_t replica, uint64_t ticket, uint64_t origin,
                   const caf::error& err) {
  auto& st = self->state;
  if (st.done || class_of(err) != errc::bad_input) return false;
  const auto& n = st.nodes[node];
  if (n.plan.kind->role != role::stage || n.tickets[replica].count(ticket) == 0) return false;
  st.durable.counters.items_rejected++;
  const std::string reason = message_of(err);
  if (st.telemetry.rejections.size() < telemetry_state::rejections_kept)
    st.telemetry.rejections.push_back({n.plan.name, origin, reason});
  log::warn(log::at{n.plan.name, st.durable.step}, "{} rejected item {} as bad input; dropped: {}",
            actor_named(self, node, replica), origin, reason);
  return true;
}

/// A request failed. A dead replica of a restartable kind is restarted by the down handler, which
/// sends its open requests again; so is a live one that answered with a transient error; anything
/// else ends the run with a message naming who waited for whom, on which message, and the class.
void request_failed(driver self, size_t node, uint32_t replica, uint64_t ticket,
                    const std::string& waiting, const std::string& message, const caf::error& err) {
  auto& st = self->state;
  if (st.done) return;
  auto& n = st.nodes[node];
  if (n.tickets[replica].count(ticket) == 0) return;  // abandoned: sent again after a restart
  if (err == caf::sec::request_receiver_down && n.plan.kind->restartable && n.plan.respawn) return;
  if (unavailable(self, node)) return;  // sent again to the lost worker's replacement
  // An actor on a worker: its down message says whether its process went away (then it is
  // awaited) or the actor alone died; that handler decides.
  if (err == caf::sec::request_receiver_down && !n.plan.placement.empty()) return;
  const std::string who = actor_named(self, node, replica);
  if (err == caf::sec::request_timeout) {
    close_ticket(self, node, replica, ticket);
    char secs[32];
    std::snprintf(secs, sizeof secs, "%g", n.plan.deadline.count() / 1000.0);
    finish(self, false,
           std::string("deadline of ") + secs + " s passed: " + waiting + " waited for " + who +
               " to answer '" + message + "'");
    return;
  }
  const errc cls = class_of(err);
  if (cls == errc::transient && n.plan.kind->restartable && n.plan.respawn) {
    // The ticket stays open: the replacement is sent the request again (the down handler
    // restarts the replica within the run's restart limits).
    log::warn(log::at{n.plan.name, st.durable.step},
              "{} failed with a transient error while {} waited for '{}'; restarting it: {}", who,
              waiting, message, message_of(err));
    self->send_exit(n.plan.replicas[replica], add_context(err, "transient failure"));
    return;
  }
  close_ticket(self, node, replica, ticket);
  finish(self, false,
         who + " failed (" + std::string(describe(cls)) + ") while " + waiting + " waited for '" +
             message + "': " + message_of(err));
}

/// Puts `fresh` in the place of replica r of node i, whose actor died: the new replica first gets
/// the newest publication sent to its predecessor (older ones still queued or in flight are
/// superseded and dropped), then the work its predecessor had not answered (counted as requeued).
static void replace_replica(driver self, size_t i, uint32_t r, caf::actor fresh) {
  auto& s = self->state;
  auto& n = s.nodes[i];
  n.plan.replicas[r] = std::move(fresh);
  self->monitor(n.plan.replicas[r]);
  bind_services(self, i);
  s.durable.counters.restarts++;
  note_activity(self);
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
    s.flow.live_publish++;
    edge.queue.push_front({*edge.last_publish, true, static_cast<int>(r)});
    dispatch(self, e);
  }
  for (auto& [t, ticket] : open) {
    if (ticket.sort == ticket_rt::publication) continue;
    if (ticket.sort == ticket_rt::work) s.durable.counters.requeued++;
    ticket.resend();
  }
}

/// What the actors on `worker` were asked and had not answered, for the error that ends the run.
static std::string in_flight_on(driver self, const std::string& worker) {
  std::string text;
  size_t count = 0;
  for (const auto& n : self->state.nodes) {
    if (n.plan.placement != worker) continue;
    for (uint32_t r = 0; r < n.tickets.size(); ++r) {
      for (const auto& [t, ticket] : n.tickets[r]) {
        if (++count > 8) continue;
        text += (text.empty() ? "" : ", ") + n.plan.name + "[" + std::to_string(r) + "] '" +
                ticket.what + "'";
      }
    }
  }
  if (count == 0) return "nothing in flight";
  if (count > 8) text += " and " + std::to_string(count - 8) + " more";
  return "in flight: " + text;
}

/// The actors placed on `worker`: "stage (kind k, replicas 0-1)".
static std::string actors_on(driver self, const std::string& worker) {
  std::string text;
  for (const auto& n : self->state.nodes) {
    if (n.plan.placement != worker) continue;
    text += (text.empty() ? "" : ", ") + n.plan.name + " (kind " + n.plan.kind->name +
            (n.plan.replicas.size() == 1
                 ? ", replica 0)"
                 : ", replicas 0-" + std::to_string(n.plan.replicas.size() - 1) + ")");
  }
  return text;
}

/// The process of `worker` went away (its connection closed): its actors are replaced once a worker
/// of that name joins again within the grace period, or the run fails naming what was lost.
static void lose_worker(driver self, const std::string& worker, const caf::node_id& lost) {
  auto& st = self->state;
  std::string cannot;
  for (const auto& n : st.nodes)
    if (n.plan.placement == worker && (!n.plan.kind->restartable || !n.plan.remote_request))
      cannot += (cannot.empty() ? "" : ", ") + n.plan.name + " (kind " + n.plan.kind->name + ")";
  const std::string what =
      "worker '" + worker + "' went away (its process ended or its connection was lost)";
  if (!cannot.empty()) {
    finish(self, false,
           what + "; it hosted " + actors_on(self, worker) + "; " + cannot +
               " cannot be restarted (its kind keeps state that died with it); " +
               in_flight_on(self, worker));
    return;
  }
  st.recovery.lost_workers.insert(worker);
  char secs[32];
  std::snprintf(secs, sizeof secs, "%g", st.plan.worker_grace.count() / 1000.0);
  log::warn("{}; waiting up to {} s for a worker to join as '{}'", what, secs, worker);
  const std::string grace = secs;
  self->request(st.plan.worker_directory, st.plan.worker_grace, rejoin_atom::value, worker, lost)
      .then(
          [=](caf::actor& host) {
            auto& s = self->state;
            if (s.done) return;
            // Spawn every replica of every actor it hosted on the new worker, then put them in
            // place.
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
                          s2.recovery.lost_workers.erase(worker);
                          log::info("worker '{}' joined again; its actors are back", worker);
                          for (auto& [where, actor] : *spawned)
                            replace_replica(self, where.first, where.second, actor);
                          for (size_t e = 0; e < s2.edges.size(); ++e) dispatch(self, e);
                          after_progress(self);
                        },
                        [=](caf::error& err) {
                          finish(self, false,
                                 "worker '" + worker +
                                     "' joined again but could not start actor '" +
                                     self->state.nodes[i].plan.name + "' (replica " +
                                     std::to_string(r) + "): " + describe_error(self, err));
                        });
              }
            }
          },
          [=](caf::error& err) {
            finish(self, false,
                   what + " and no worker joined as '" + worker + "' within " + grace +
                       " s (run.workerGraceSeconds); it hosted " + actors_on(self, worker) + "; " +
                       in_flight_on(self, worker) +
                       (err == caf::sec::request_timeout ? ""
                                                         : " (" + describe_error(self, err) + ")"));
          });
}

/// Why replica r of node i, which just died, must not be restarted again, or "": it died more
/// than run.maxRestarts times within run.restartWindowSeconds, or run.maxStartupFailures times in a
/// row before answering anything (a failure at start-up, which every restart repeats).
static std::string restart_refused(driver self, size_t i, uint32_t r) {
  auto& s = self->state;
  auto& n = s.nodes[i];
  const auto now = steady::now();
  auto& times = n.restarted[r];
  while (!times.empty() && now - times.front() > s.plan.restart_window) times.pop_front();
  n.startup_failures[r] = n.answered[r] ? 0 : n.startup_failures[r] + 1;
  char secs[32];
  if (n.startup_failures[r] >= s.plan.max_startup_failures) {
    return "died at start-up (before answering anything) " + std::to_string(n.startup_failures[r]) +
           " times in a row (run.maxStartupFailures " +
           std::to_string(s.plan.max_startup_failures) + ")";
  }
  if (times.size() >= s.plan.max_restarts) {
    std::snprintf(secs, sizeof secs, "%g", s.plan.restart_window.count() / 1000.0);
    return "was restarted " + std::to_string(times.size()) + " times within " + secs +
           " s and died again (run.maxRestarts " + std::to_string(s.plan.max_restarts) +
           ", run.restartWindowSeconds " + secs + ")";
  }
  times.push_back(now);
  n.answered[r] = 0;
  return "";
}

/// An actor the driver monitors went down: a lost worker is awaited, a restartable replica is
/// replaced, anything else ends the run naming the actor.
void on_actor_down(driver self, const caf::down_msg& dm) {
  auto& s = self->state;
  if (s.done) return;
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    auto& n = s.nodes[i];
    for (uint32_t r = 0; r < n.plan.replicas.size(); ++r) {
      if (n.plan.replicas[r].address() != dm.source) continue;
      if (!n.plan.placement.empty() && s.recovery.lost_workers.count(n.plan.placement)) return;
      if (dm.reason == caf::exit_reason::remote_link_unreachable && s.plan.worker_directory &&
          s.plan.worker_grace.count() > 0) {
        lose_worker(self, n.plan.placement, dm.source.node());
        return;
      }
      if (n.plan.kind->restartable && n.plan.respawn) {
        if (auto why = restart_refused(self, i, r); !why.empty()) {
          finish(self, false,
                 "actor '" + n.plan.name + "' (replica " + std::to_string(r) + ", kind " +
                     n.plan.kind->name + ") " + why +
                     "; last cause: " + describe_error(self, dm.reason));
          return;
        }
        caf::actor fresh;
        try {
          fresh = n.plan.respawn(r);
        } catch (const std::exception& e) {
          finish(self, false,
                 "actor '" + n.plan.name + "' (replica " + std::to_string(r) + ", kind " +
                     n.plan.kind->name + ") died (" + describe_error(self, dm.reason) +
                     ") and could not be restarted: " + e.what());
          return;
        }
        replace_replica(self, i, r, fresh);
        return;
      }
      finish(self, false,
             "actor '" + n.plan.name + "' (replica " + std::to_string(r) + ", kind " +
                 n.plan.kind->name +
                 (n.plan.placement.empty() ? "" : ", on worker '" + n.plan.placement + "'") +
                 ") died: " + describe_error(self, dm.reason) +
                 (dm.reason == caf::exit_reason::remote_link_unreachable
                      ? " (its worker process went away)"
                      : ""));
      return;
    }
  }
}

}  // namespace milesrt::runtime::driver_impl
