#pragma once
/// Checks of a graph against the registry of actor kinds: kinds, ports and their types, parameters,
/// and whether the schedule can drive every actor.

#include <capnp/dynamic.h>
#include <capnp/message.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/core/kind.hpp"
#include "runtime/graph/loader.hpp"

namespace milesrt::graph {

/// Every problem, each naming the file, the actor or edge, and the field. Empty when runnable.
problem_list validate_kinds(const loaded_graph& g, const runtime::kind_registry& kinds);

/// A custom kind's parameters for one actor: the graph's values over the declared defaults.
/// Call only on a graph that validate_kinds accepted.
std::map<std::string, runtime::param_value> resolve_params(schema::ActorSpec::Reader actor,
                                                           const runtime::kind_descriptor& kind);

/// The actor's params struct for union member `member`, or the struct's defaults when the graph
/// leaves params at `none` (those live in `storage`, which must outlive the reader).
capnp::DynamicStruct::Reader params_struct(schema::ActorSpec::Reader actor,
                                           const std::string& member,
                                           std::shared_ptr<capnp::MallocMessageBuilder>& storage);

/// What is wrong with a kind's `params_member` when ActorSpec.params (the params union the app's
/// /milesrt/kinds.capnp declares) has no such member; "" when it has, or the kind takes none.
std::string params_member_problem(const runtime::kind_descriptor& kind);

/// Whether an edge leaving `from_port` of an actor of `kind` is a service edge: the port is one of
/// the kind's `uses` ports (the edge then ends at a `serves` port; runtime/core/services.hpp).
bool is_service_edge(const runtime::kind_descriptor& kind, const std::string& from_port);

/// Parses `text` as a value of type `t`; false when it is not one.
bool parse_param(const std::string& text, runtime::param_type t, runtime::param_value& out);

}  // namespace milesrt::graph
