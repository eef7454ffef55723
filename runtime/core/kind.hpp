#pragma once
/// Actor kinds are descriptors: a name, typed ports, declared parameters, a role the schedule
/// driver understands, a factory, and whether a dead actor of the kind may be restarted.

#include <capnp/dynamic.h>

#include <caf/fwd.hpp>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "runtime/core/problem.hpp"
#include "runtime/core/process_store.hpp"

namespace milesrt::runtime {

/// How the schedule driver talks to an actor of the kind (see messages.hpp for the requests).
enum class role {
  source,   ///< answers `produce`: emits new work items when the schedule admits them
  stage,    ///< answers `process`: turns items arriving on input ports into items on output ports
  learner,  ///< answers `train`: consumes a batch of items and returns a new model version
  /// answers `put` and `take`: holds what the learner's edges carry and hands out its batches (at
  /// most one per graph; without one the driver keeps a first-in-first-out queue itself)
  buffer,
};

const char* to_string(role r);

/// A port and the type of the messages it carries. An edge joins ports of equal type.
struct port_spec {
  std::string name;
  std::string type;
  std::string help;
  /// For a learner's input: items arrive one at a time through `process`, as at a stage's port
  /// (e.g. a value model that annotates the items passing by), not in the learner's batches.
  bool per_item = false;
};

/// A value of a custom kind's parameter.
using param_value = std::variant<bool, int64_t, double, std::string>;

enum class param_type { boolean, integer, real, text };

const char* to_string(param_type t);

/// A parameter that a custom kind declares; the graph's `custom` list is checked against these.
struct param_spec {
  std::string name;
  param_type type = param_type::integer;
  std::string help;
  bool required = false;
  std::optional<param_value> fallback;  ///< used when the graph does not set it
  std::optional<double> min, max;       ///< inclusive bounds for integer and real parameters
};

/// Everything a factory needs to build one replica of an actor.
struct actor_setup {
  std::string name;      ///< the actor's name in the graph
  uint32_t replica = 0;  ///< 0 .. replicas-1
  uint64_t seed = 0;     ///< the run's seed; kinds derive their own streams from it
  std::filesystem::path run_dir;
  uint64_t steps = 0;       ///< the run's training steps
  uint32_t batch_size = 1;  ///< items per training step
  /// Shared with the other actors of this process (never null).
  std::shared_ptr<process_store> store;
  /// Custom parameters after defaults, keyed by name (empty for kinds with a params struct).
  std::map<std::string, param_value> params;
  /// The kind's params struct (a member of ActorSpec.params, or its defaults when the graph says
  /// none), valid during the factory call only; empty where the kind has none.
  std::optional<capnp::DynamicStruct::Reader> params_struct;
  /// Keeps the defaults params_struct may point into.
  std::shared_ptr<void> params_storage;
  /// Where long work of the actor (loading a model, an evaluation) reports its progress
  /// (runtime/core/progress.hpp): stderr, or null for none (`milesrt run --quiet`, workers).
  std::FILE* progress = nullptr;
};

/// Builds one replica; returns an actor that answers the requests of the kind's role.
using actor_factory = std::function<caf::actor(caf::actor_system&, const actor_setup&)>;

/// An actor's neighbour in its graph: the other end of one of its edges.
struct graph_neighbour {
  std::string name, kind, placement;
  std::string port;  ///< this actor's port of the edge (its output, or its input for upstream)
};

/// An actor's place in its graph, for checks that need more than its own params (a transport
/// that needs its two ends in one process, say).
struct actor_in_graph {
  std::string name, placement;
  std::vector<graph_neighbour> upstream;    ///< actors with an edge into this one
  std::vector<graph_neighbour> downstream;  ///< actors this one has an edge into
  uint32_t batch_size = 1;                  ///< the run's items per training step
};

/// A setting every actor of a graph that states it must agree on (see
/// kind_descriptor::graph_settings): its name, the params field it comes from (for the message)
/// and its value as the user would read it.
struct graph_setting {
  std::string name, field, value;
};

struct kind_descriptor {
  std::string name;
  std::string summary;
  enum role role = role::stage;
  std::vector<port_spec> inputs;
  std::vector<port_spec> outputs;
  /// Service ports (runtime/core/services.hpp), outside the schedule's data flow: a `serves` port
  /// answers requests of its type; a `uses` port is joined by one edge to a `serves` port of the
  /// same type, and the runtime hands the actor that server's replicas (`uses_atom`).
  std::vector<port_spec> serves;
  std::vector<port_spec> uses;
  /// Declared parameters, for kinds configured through ActorSpec.params.custom.
  std::vector<param_spec> params;
  /// For built-in kinds with their own params struct: the ActorSpec.params union member.
  std::string params_member;
  /// Checks of the params struct beyond its types (required fields, ranges), run by validation
  /// before anything starts: a problem per problem, its field a path inside the params struct
  /// (validation adds the file, the actor and "params.<member>.").
  std::function<problem_list(capnp::DynamicStruct::Reader)> check_params;
  /// Checks of the params struct against the actor's neighbours and placements, run by validation
  /// once every kind and edge is known: problems as check_params gives them.
  std::function<problem_list(capnp::DynamicStruct::Reader, const actor_in_graph&)> check_in_graph;
  /// Settings that must be equal on every actor of the graph stating the same name (what one
  /// actor produces and another must be built to consume, say): validation names each actor
  /// whose value differs from the first stating it.
  std::function<std::vector<graph_setting>(capnp::DynamicStruct::Reader)> graph_settings;
  actor_factory spawn;
  /// A dead actor of this kind is replaced by a fresh one (its state is not restored; it gets the
  /// newest publication, then the work its predecessor had not answered) instead of failing the
  /// run.
  bool restartable = false;
};

/// The actor kinds a process knows: built in main, extended by plugins, passed down (no singleton).
class kind_registry {
 public:
  /// Adds a kind; a second kind of the same name is a programming error (throws).
  void add(kind_descriptor kind);
  const kind_descriptor* find(const std::string& name) const;
  std::vector<std::string> names() const;
  /// What the kinds need of the actor system, set on its config before it starts (CAF 0.17
  /// cannot add types later): the message types the kinds send (each kind adds its type-ID
  /// block), thread hooks the app adds for every actor thread.
  void add_types(std::function<void(caf::actor_system_config&)> hook) {
    types_.push_back(std::move(hook));
  }
  void register_types(caf::actor_system_config& config) const {
    for (const auto& hook : types_) hook(config);
  }

 private:
  std::map<std::string, kind_descriptor> kinds_;
  std::vector<std::function<void(caf::actor_system_config&)>> types_;
};

}  // namespace milesrt::runtime
