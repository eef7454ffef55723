#include "runtime/worker/workers.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <mutex>
#include <thread>

#include "runtime/core/messages.hpp"
#include "runtime/graph/loader.hpp"

namespace milesrt::runtime {

/// The refusals of a rendezvous, for the error of wait_for.
struct refusal_log {
  std::mutex mutex;
  std::vector<std::string> lines;
};

std::string join_refusal(const join_policy& policy, const std::string& name,
                         const std::string& secret) {
  if (!policy.secret.empty()) {
    // Compared in a time that does not depend on where the first difference is.
    unsigned char diff = secret.size() == policy.secret.size() ? 0 : 1;
    for (size_t i = 0; i < secret.size(); ++i)
      diff |= static_cast<unsigned char>(secret[i] ^ policy.secret[i % policy.secret.size()]);
    if (secret.empty()) return "it presented no shared secret (the run requires one)";
    if (diff != 0) return "it presented a wrong shared secret";
  }
  if (!policy.names.empty() && !policy.names.count(name)) {
    std::string names;
    for (const auto& n : policy.names) names += (names.empty() ? "" : ", ") + n;
    return "no actor is placed on a worker named '" + name +
           "' (the graph places actors on: " + names + ")";
  }
  return "";
}

namespace {

struct directory_state {
  std::map<std::string, caf::actor> workers;  ///< joined and alive
  /// Requests for a worker not (or no longer) joined: answered when one joins.
  std::multimap<std::string, std::pair<caf::node_id, caf::response_promise>> waiting;
};

/// Admits the workers `policy` allows; answers `rejoin` for `name` with a joined host outside
/// `lost`, now or once one joins.
caf::behavior worker_directory(caf::stateful_actor<directory_state>* self,
                               std::shared_ptr<const join_policy> policy,
                               std::shared_ptr<refusal_log> log) {
  // Messages of another shape (from a stranger that reached the port) are dropped.
  self->set_default_handler(caf::drop);
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& w = self->state.workers;
    for (auto it = w.begin(); it != w.end(); ++it) {
      if (it->second.address() == dm.source) {
        w.erase(it);
        return;
      }
    }
  });
  return {
      [=](join_atom, const std::string& name, const std::string& secret,
          const caf::actor& host) -> std::string {
        auto why = host ? join_refusal(*policy, name, secret) : "it named no host actor";
        if (!why.empty()) {
          std::string line = "refused a worker joining as '" + name + "' (process " +
                             (host ? caf::to_string(host.node()) : "?") + "): " + why;
          if (policy->report) policy->report(line);
          std::lock_guard<std::mutex> lock(log->mutex);
          log->lines.push_back(std::move(line));
          return why;
        }
        auto& st = self->state;
        st.workers[name] = host;
        self->monitor(host);
        auto range = st.waiting.equal_range(name);
        for (auto it = range.first; it != range.second;) {
          if (host.node() == it->second.first) {
            ++it;
            continue;
          }
          it->second.second.deliver(host);
          it = st.waiting.erase(it);
        }
        return "";
      },
      [=](rejoin_atom, const std::string& name,
          const caf::node_id& lost) -> caf::result<caf::actor> {
        const auto& sender = self->current_sender();
        if (!sender || sender->node() != self->node()) {
          return caf::make_error(caf::sec::runtime_error,
                                 "the worker directory answers its own process only");
        }
        auto& st = self->state;
        auto it = st.workers.find(name);
        if (it != st.workers.end() && it->second.node() != lost) return it->second;
        auto promise = self->make_response_promise();
        st.waiting.emplace(name, std::make_pair(lost, promise));
        return caf::delegated<caf::actor>();
      },
  };
}

}  // namespace

worker_rendezvous::worker_rendezvous(caf::actor_system& sys, const std::string& host, uint16_t port,
                                     join_policy policy)
    : sys_(sys), self_(sys), refused_(std::make_shared<refusal_log>()) {
  directory_ =
      sys.spawn(worker_directory, std::make_shared<const join_policy>(std::move(policy)), refused_);
  auto published =
      sys.middleman().publish(directory_, port, host.empty() ? nullptr : host.c_str(), true);
  if (!published) {
    self_->send_exit(directory_, caf::exit_reason::user_shutdown);
    throw std::runtime_error("cannot listen on " + host + ":" + std::to_string(port) + ": " +
                             sys.render(published.error()));
  }
  port_ = *published;
}

worker_rendezvous::~worker_rendezvous() {
  self_->send_exit(directory_, caf::exit_reason::user_shutdown);
}

void worker_rendezvous::wait_for(const std::set<std::string>& names,
                                 std::chrono::milliseconds deadline) {
  std::set<std::string> missing = names;
  const auto until = std::chrono::steady_clock::now() + deadline;
  for (const auto& n : names) {
    auto left = std::max(std::chrono::milliseconds(1),
                         std::chrono::duration_cast<std::chrono::milliseconds>(
                             until - std::chrono::steady_clock::now()));
    self_->request(directory_, left, rejoin_atom::value, n, caf::node_id{})
        .receive([&](const caf::actor&) { missing.erase(n); }, [](caf::error&) {});
    if (!missing.count(n)) continue;
    // Past the deadline: name every worker still missing.
    std::string m;
    for (const auto& k : missing) m += (m.empty() ? "" : ", ") + k;
    char secs[32];
    std::snprintf(secs, sizeof secs, "%g", deadline.count() / 1000.0);
    std::string refused;
    {
      std::lock_guard<std::mutex> lock(refused_->mutex);
      for (const auto& r : refused_->lines) refused += "; " + r;
    }
    throw std::runtime_error("worker(s) " + m + " did not join within " + secs +
                             " s (start them with: milesrt worker --connect HOST:" +
                             std::to_string(port_) + " --name NAME)" + refused);
  }
}

caf::actor worker_rendezvous::spawn(const std::string& worker, const spawn_request& req,
                                    std::chrono::milliseconds deadline) {
  caf::actor host;
  self_
      ->request(directory_, std::chrono::milliseconds(100), rejoin_atom::value, worker,
                caf::node_id{})
      .receive([&](caf::actor& a) { host = a; }, [](caf::error&) {});
  if (!host) throw std::runtime_error("no worker named '" + worker + "' joined");
  caf::actor result;
  std::string error;
  self_->request(host, deadline, spawn_atom::value, req)
      .receive([&](caf::actor& a) { result = a; },
               [&](caf::error& e) {
                 error = "worker '" + worker + "' could not spawn '" + req.actor +
                         "': " + sys_.render(e);
               });
  if (!error.empty()) throw std::runtime_error(error);
  return result;
}

namespace {

struct host_state {
  std::vector<caf::actor> children;
  std::shared_ptr<process_store> store = std::make_shared<process_store>();
};

caf::behavior worker_host(caf::stateful_actor<host_state>* self, const kind_registry* kinds,
                          std::string name) {
  // When the run ends, so do the actors this worker hosts.
  self->set_exit_handler([=](caf::exit_msg& m) {
    for (auto& a : self->state.children) self->send_exit(a, m.reason);
    self->quit(m.reason);
  });
  return {
      [=](spawn_atom, const spawn_request& req) -> caf::result<caf::actor> {
        try {
          auto g = graph::loaded_graph::from_flat("graph from the run", req.graph);
          for (auto actor : g->reader().getActors()) {
            if (std::string(actor.getName()) != req.actor) continue;
            const kind_descriptor* kind = kinds->find(actor.getKind());
            if (kind == nullptr) {
              return caf::make_error(caf::sec::runtime_error, "worker '" + name +
                                                                  "' knows no kind '" +
                                                                  std::string(actor.getKind()) +
                                                                  "' (start it with --plugin LIB)");
            }
            auto setup = make_setup(*g, actor, *kind, req.replica,
                                    std::string(g->reader().getRun().getDir()), self->state.store);
            auto spawned = kind->spawn(self->system(), setup);
            self->state.children.push_back(spawned);
            return spawned;
          }
          return caf::make_error(caf::sec::runtime_error,
                                 "the graph has no actor '" + req.actor + "'");
        } catch (const std::exception& e) {
          return caf::make_error(caf::sec::runtime_error, e.what());
        }
      },
  };
}

}  // namespace

worker_outcome serve_as_worker(caf::actor_system& sys, const kind_registry& kinds,
                               const std::string& host, uint16_t port, const std::string& name,
                               const std::string& secret, std::chrono::milliseconds deadline) {
  auto until = std::chrono::steady_clock::now() + deadline;
  caf::expected<caf::actor> run = caf::sec::runtime_error;
  while (true) {
    run = sys.middleman().remote_actor(host, port);
    if (run) break;
    if (std::chrono::steady_clock::now() > until) {
      return {"cannot reach the run at " + host + ":" + std::to_string(port) + " within " +
              std::to_string(deadline.count() / 1000) + " s: " + sys.render(run.error())};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  auto worker = sys.spawn(worker_host, &kinds, name);
  caf::scoped_actor self{sys};
  self->monitor(*run);
  worker_outcome outcome;
  self->request(*run, std::chrono::seconds(30), join_atom::value, name, secret, worker)
      .receive(
          [&](const std::string& why) {
            if (why.empty()) return;
            outcome = {
                "the run at " + host + ":" + std::to_string(port) + " refused this worker: " + why,
                true};
          },
          [&](caf::error& e) {
            outcome.error = "the run at " + host + ":" + std::to_string(port) +
                            " did not answer the join: " + sys.render(e);
          });
  // The run's process owns the work; this process lives until it goes away.
  if (outcome.error.empty()) self->receive([](const caf::down_msg&) {});
  // Its actors get the exit from the host; give them a moment to stop before the process ends.
  self->monitor(worker);
  self->send_exit(worker, caf::exit_reason::user_shutdown);
  self->receive([](const caf::down_msg&) {}, caf::after(std::chrono::seconds(10)) >> [] {});
  return outcome;
}

}  // namespace milesrt::runtime
