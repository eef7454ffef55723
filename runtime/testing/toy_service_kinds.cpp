// Toy kinds joined by a service edge: toy_doubler serves `double` (x -> 2x), toy_asker uses it
// for each item passing through. They exercise the runtime's service edges without any model.
#include <caf/all.hpp>
#include <chrono>

#include "runtime/core/interfaces.hpp"
#include "runtime/core/services.hpp"
#include "runtime/testing/toy_kinds.hpp"

namespace milesrt::toy {
namespace {
using namespace milesrt::runtime;

/// The service's one request: (ask, x) -> (2x, the replica that answered).
using ask_atom = caf::atom_constant<caf::atom("toy_ask")>;

uint64_t value_of(const envelope& e) {
  return e.payload.match_elements<uint64_t>() ? e.payload.get_as<uint64_t>(0) : 0;
}

// -- toy_doubler: a stage with no data ports; it answers `double` requests.

struct doubler_state {
  uint64_t answered = 0;
};

using doubler_actor =
    stage_actor::extend<caf::replies_to<ask_atom, uint64_t>::with<uint64_t, uint32_t>>;

doubler_actor::behavior_type doubler_fn(doubler_actor::stateful_pointer<doubler_state> self,
                                        uint32_t replica) {
  return {
      [=](ask_atom, uint64_t x) -> caf::result<uint64_t, uint32_t> {
        self->state.answered++;
        return {2 * x, replica};
      },
      [=](process_atom, const std::string&, envelope&) { return node_reply{}; },
      [=](snapshot_atom, const std::string&) { return actor_state{}; },
      [=](restore_atom, const std::string&, const actor_state&) { return true; },
  };
}

// -- toy_asker: each item x becomes 2x, as its `double` server answers.

struct asker_state {
  service_links links;
  uint64_t version = 0;  ///< the last on `weights`: items are stamped with it
};

using asker_actor = stage_actor::extend_with<service_user>;

asker_actor::behavior_type asker_fn(asker_actor::stateful_pointer<asker_state> self) {
  return {
      [=](uses_atom, const std::string& port, std::vector<caf::actor>& servers) {
        self->state.links.set(port, std::move(servers));
      },
      [=](process_atom, const std::string& port, envelope& e) -> caf::result<node_reply> {
        if (port == "weights") {
          self->state.version = value_of(e);
          return node_reply{};
        }
        e.min_version = e.max_version = self->state.version;
        auto server = self->state.links.pick("double");
        if (!server) return caf::make_error(caf::sec::runtime_error, "toy_asker: no server");
        auto rp = self->make_response_promise<node_reply>();
        self->request(server, std::chrono::seconds(10), ask_atom::value, value_of(e))
            .then(
                [=](uint64_t doubled, uint32_t replica) mutable {
                  node_reply reply;
                  envelope out = e;
                  out.payload = caf::make_message(doubled);
                  reply.outputs.push_back({"items", std::move(out)});
                  reply.metrics["asked_replica_" + std::to_string(replica)] = 1.0;
                  rp.deliver(std::move(reply));
                },
                [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
        return rp;
      },
      [=](snapshot_atom, const std::string&) { return actor_state{}; },
      [=](restore_atom, const std::string&, const actor_state&) { return true; },
  };
}

}  // namespace

void register_service_kinds(runtime::kind_registry& registry, const std::string& item,
                            const std::string& version) {
  const std::string service = "toy.double";

  kind_descriptor doubler;
  doubler.name = "toy_doubler";
  doubler.summary = "serves `double`: x -> 2x (no data ports)";
  doubler.role = role::stage;
  doubler.serves = {{"double", service, "x -> 2x, and the replica that answered"}};
  doubler.restartable = true;
  doubler.spawn = [](caf::actor_system& sys, const actor_setup& s) {
    return caf::actor_cast<caf::actor>(sys.spawn(doubler_fn, s.replica));
  };
  registry.add(doubler);

  kind_descriptor asker;
  asker.name = "toy_asker";
  asker.summary = "turns each item x into 2x by asking its `double` service";
  asker.role = role::stage;
  asker.inputs = {{"items", item, ""}, {"weights", version, "new versions from the learner"}};
  asker.outputs = {{"items", item, "2x for each x"}};
  asker.uses = {{"double", service, "the server that doubles"}};
  asker.restartable = true;
  asker.spawn = [](caf::actor_system& sys, const actor_setup&) {
    return caf::actor_cast<caf::actor>(sys.spawn(asker_fn));
  };
  registry.add(asker);
}

}  // namespace milesrt::toy
