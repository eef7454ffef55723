#pragma once
/// Several processes: the run publishes a rendezvous point; `milesrt worker --connect HOST:PORT`
/// processes join it by name and spawn the actors whose placement names them. Messages between the
/// processes go through CAF's middleman.

#include <caf/fwd.hpp>
#include <caf/scoped_actor.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "runtime/driver/run.hpp"

namespace milesrt::runtime {

/// Who may join a run: a worker must present `secret` (when not empty) and a name in `names` (the
/// workers the graph places actors on; empty: any name). A refused worker is told why and
/// `report` (when set) gets one line naming it.
struct join_policy {
  std::set<std::string> names;
  std::string secret;
  std::function<void(const std::string&)> report;
};

/// Why `policy` refuses a worker joining as `name` with `secret`; "" when it may join.
std::string join_refusal(const join_policy& policy, const std::string& name,
                         const std::string& secret);

/// The driver process's side: listens on HOST:PORT and waits for named workers. Its directory (an
/// actor) admits the workers its policy allows, forgets one whose process goes away, and answers
/// `rejoin` (messages.hpp; only to actors of this process) once a replacement joins under the same
/// name.
class worker_rendezvous {
 public:
  /// Publishes the rendezvous on `host:port` (port 0: any); throws naming the address on failure.
  worker_rendezvous(caf::actor_system& sys, const std::string& host, uint16_t port,
                    join_policy policy = {});
  ~worker_rendezvous();
  uint16_t port() const { return port_; }
  /// The directory the driver asks for replacements of lost workers.
  caf::actor directory() const { return directory_; }
  /// Waits until every named worker has joined; throws naming the missing ones (and the workers
  /// refused meanwhile) after `deadline`.
  void wait_for(const std::set<std::string>& names, std::chrono::milliseconds deadline);
  /// Spawns an actor on a joined worker (the remote_spawner of a run).
  caf::actor spawn(const std::string& worker, const spawn_request& req,
                   std::chrono::milliseconds deadline);

 private:
  caf::actor_system& sys_;
  caf::scoped_actor self_;
  caf::actor directory_;
  uint16_t port_ = 0;
  std::shared_ptr<struct refusal_log> refused_;
};

/// How a worker process's service ended: `error` is "" when the run ended normally; `refused`
/// when the run did not let it join (a wrong secret or name).
struct worker_outcome {
  std::string error;
  bool refused = false;
};

/// The worker process's side: connects to `host:port` (retrying until `deadline`), joins as
/// `name` presenting `secret`, hosts the actors the run asks for, and returns when the run's
/// process goes away.
worker_outcome serve_as_worker(caf::actor_system& sys, const kind_registry& kinds,
                               const std::string& host, uint16_t port, const std::string& name,
                               const std::string& secret, std::chrono::milliseconds deadline);

}  // namespace milesrt::runtime
