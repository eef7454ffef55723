#include "runtime/worker/workers.hpp"

#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "runtime/core/messages.hpp"
#include "runtime/graph/loader.hpp"

namespace milesrt::runtime {

worker_rendezvous::worker_rendezvous(caf::actor_system& sys, const std::string& host,
                                     uint16_t port)
    : sys_(sys), self_(sys) {
  auto published = sys.middleman().publish(caf::actor_cast<caf::actor>(self_), port,
                                           host.empty() ? nullptr : host.c_str(), true);
  if (!published) {
    throw std::runtime_error("cannot listen on " + host + ":" + std::to_string(port) + ": " +
                             sys.render(published.error()));
  }
  port_ = *published;
}

void worker_rendezvous::wait_for(const std::set<std::string>& names,
                                 std::chrono::milliseconds deadline) {
  auto until = std::chrono::steady_clock::now() + deadline;
  auto missing = [&] {
    std::string m;
    for (const auto& n : names)
      if (workers_.count(n) == 0) m += (m.empty() ? "" : ", ") + n;
    return m;
  };
  while (!missing().empty()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%g", deadline.count() / 1000.0);
      throw std::runtime_error("worker(s) " + missing() + " did not join within " + secs +
                               " s (start them with: milesrt worker --connect HOST:" +
                               std::to_string(port_) + " --name NAME)");
    }
    self_->receive(
        [&](join_atom, const std::string& name, const caf::actor& host) {
          workers_[name] = host;
          return true;
        },
        caf::after(left) >> [] {});
  }
}

caf::actor worker_rendezvous::spawn(const std::string& worker, const spawn_request& req,
                                    std::chrono::milliseconds deadline) {
  auto it = workers_.find(worker);
  if (it == workers_.end()) throw std::runtime_error("no worker named '" + worker + "' joined");
  caf::actor result;
  std::string error;
  self_->request(it->second, deadline, spawn_atom::value, req)
      .receive([&](caf::actor& a) { result = a; },
               [&](caf::error& e) {
                 error = "worker '" + worker + "' could not spawn '" + req.actor + "': " +
                         sys_.render(e);
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
              return caf::make_error(caf::sec::runtime_error,
                                     "worker '" + name + "' knows no kind '" +
                                         std::string(actor.getKind()) +
                                         "' (start it with --plugin LIB)");
            }
            auto setup = make_setup(*g, actor, *kind, req.replica,
                                    std::string(g->reader().getRun().getDir()),
                                    self->state.store);
            auto spawned = kind->spawn(self->system(), setup);
            self->state.children.push_back(spawned);
            return spawned;
          }
          return caf::make_error(caf::sec::runtime_error, "the graph has no actor '" + req.actor + "'");
        } catch (const std::exception& e) {
          return caf::make_error(caf::sec::runtime_error, e.what());
        }
      },
  };
}

}  // namespace

std::string serve_as_worker(caf::actor_system& sys, const kind_registry& kinds,
                            const std::string& host, uint16_t port, const std::string& name,
                            std::chrono::milliseconds deadline) {
  auto until = std::chrono::steady_clock::now() + deadline;
  caf::expected<caf::actor> run = caf::sec::runtime_error;
  while (true) {
    run = sys.middleman().remote_actor(host, port);
    if (run) break;
    if (std::chrono::steady_clock::now() > until) {
      return "cannot reach the run at " + host + ":" + std::to_string(port) + " within " +
             std::to_string(deadline.count() / 1000) + " s: " + sys.render(run.error());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  auto worker = sys.spawn(worker_host, &kinds, name);
  caf::scoped_actor self{sys};
  self->monitor(*run);
  self->send(*run, join_atom::value, name, worker);
  // The run's process owns the work; this process lives until it goes away.
  self->receive([](const caf::down_msg&) {});
  // Its actors get the exit from the host; give them a moment to stop before the process ends.
  self->monitor(worker);
  self->send_exit(worker, caf::exit_reason::user_shutdown);
  self->receive([](const caf::down_msg&) {}, caf::after(std::chrono::seconds(10)) >> [] {});
  return "";
}

}  // namespace milesrt::runtime
