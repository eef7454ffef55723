#pragma once
/// Service edges: request/response between two actors, beside the schedule's one-way data flow.
///
/// A kind declares `serves` ports (it answers requests of the port's type, in messages of its own
/// choosing) and `uses` ports (it sends such requests). A graph edge joins a user's `uses` port to
/// a server's `serves` port of the same type. The runtime checks the edge like a data edge and,
/// once every actor is spawned (and again whenever a replica on either end is replaced), sends
/// each replica of the user `(uses_atom, port, servers)`: the handles of all the server's
/// replicas, wherever they run (another process's actors arrive as CAF proxies). The user picks
/// among them (`service_links::pick`: round robin) and talks to them directly; the driver takes no
/// part in the requests, which carry the user's own deadlines.

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace milesrt::runtime {

/// The runtime -> a user of a service: (port, the server's replicas). Sent before the driver's
/// first request to the user, and again whenever a replica on either end is replaced.
using uses_atom = caf::atom_constant<caf::atom("uses")>;

/// What an actor with `uses` ports answers besides its role's requests (extend its role's typed
/// interface with it, or handle the message in an untyped behavior).
using service_user =
    caf::typed_actor<caf::reacts_to<uses_atom, std::string, std::vector<caf::actor>>>;

/// A user's view of its services: the servers behind each `uses` port, as the runtime last told.
class service_links {
 public:
  /// The runtime's `uses` message: replaces what the port had.
  void set(const std::string& port, std::vector<caf::actor> servers) {
    auto& p = ports_[port];
    p.servers = std::move(servers);
    p.next = 0;
  }
  /// Whether the runtime has named at least one server for the port.
  bool ready(const std::string& port) const {
    auto it = ports_.find(port);
    return it != ports_.end() && !it->second.servers.empty();
  }
  /// The next server of the port, round robin; an invalid handle where none is known.
  caf::actor pick(const std::string& port) {
    auto it = ports_.find(port);
    if (it == ports_.end() || it->second.servers.empty()) return {};
    auto& p = it->second;
    return p.servers[p.next++ % p.servers.size()];
  }
  /// All the servers of the port (every replica), in replica order.
  std::vector<caf::actor> all(const std::string& port) const {
    auto it = ports_.find(port);
    return it == ports_.end() ? std::vector<caf::actor>{} : it->second.servers;
  }

 private:
  struct port_links {
    std::vector<caf::actor> servers;
    size_t next = 0;
  };
  std::map<std::string, port_links> ports_;
};

}  // namespace milesrt::runtime
