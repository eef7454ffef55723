#pragma once
/// Several processes: the run publishes a rendezvous point; `milesrt worker --connect HOST:PORT`
/// processes join it by name and spawn the actors whose placement names them. Messages between the
/// processes go through CAF's middleman.

#include <caf/fwd.hpp>
#include <caf/scoped_actor.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "runtime/driver/run.hpp"

namespace milesrt::runtime {

/// The driver process's side: listens on HOST:PORT and waits for named workers. Its directory (an
/// actor) knows the workers that joined, forgets one whose process goes away, and answers
/// `rejoin` (messages.hpp) once a replacement joins under the same name.
class worker_rendezvous {
 public:
  /// Publishes the rendezvous on `host:port` (port 0: any); throws naming the address on failure.
  worker_rendezvous(caf::actor_system& sys, const std::string& host, uint16_t port);
  ~worker_rendezvous();
  uint16_t port() const { return port_; }
  /// The directory the driver asks for replacements of lost workers.
  caf::actor directory() const { return directory_; }
  /// Waits until every named worker has joined; throws naming the missing ones after `deadline`.
  void wait_for(const std::set<std::string>& names, std::chrono::milliseconds deadline);
  /// Spawns an actor on a joined worker (the remote_spawner of a run).
  caf::actor spawn(const std::string& worker, const spawn_request& req,
                   std::chrono::milliseconds deadline);

 private:
  caf::actor_system& sys_;
  caf::scoped_actor self_;
  caf::actor directory_;
  uint16_t port_ = 0;
};

/// The worker process's side: connects to `host:port` (retrying until `deadline`), joins as
/// `name`, hosts the actors the run asks for, and returns when the run's process goes away.
/// Returns an error line, or "" when the run ended normally.
std::string serve_as_worker(caf::actor_system& sys, const kind_registry& kinds,
                            const std::string& host, uint16_t port, const std::string& name,
                            std::chrono::milliseconds deadline);

}  // namespace milesrt::runtime
