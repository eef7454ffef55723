#pragma once
/// Validation against the kinds, the part about the graph's shape (internal to runtime/graph/):
/// edges between ports of one type, service edges, the roles the schedule needs, the buffer's
/// place, reachability, and the kinds' checks that need an actor's neighbours. check_kinds.cpp
/// checks each actor and its params, then calls these.

#include <map>
#include <set>
#include <string>
#include <vector>

#include "runtime/core/kind.hpp"
#include "runtime/graph/loader.hpp"

namespace milesrt::graph::shape {

/// The port named `name`, or null.
const runtime::port_spec* find_port(const std::vector<runtime::port_spec>& ports,
                                    const std::string& name);
/// The params union member the actor's spec sets ("none" when it sets none).
std::string union_member(schema::ActorSpec::Reader actor);
/// "a, b, c", or "none".
std::string port_list(const std::vector<runtime::port_spec>& ports);

/// Collects problems located at `where` in the graph's file: "<file>: <where>: <what>".
struct reporter {
  std::string file;
  problem_list& out;
  void operator()(const std::string& where, const std::string& what) const {
    out.push_back(place_problem(file, where, what));
  }
  /// A kind's problem (its field a path inside the actor's params), located at `where`.
  void operator()(const std::string& where, problem p) const {
    p.file = file;
    p.where = where;
    out.push_back(std::move(p));
  }
};

using kinds_by_actor = std::map<std::string, const runtime::kind_descriptor*>;

inline std::string edge_where(unsigned i, schema::Edge::Reader edge) {
  return "edge " + std::to_string(i) + " (" + std::string(edge.getFrom()) + " -> " +
         std::string(edge.getTo()) + ")";
}

/// The actors of each role the schedule cares about, in graph order (the first learner is the
/// policy, whose version is the run's).
struct roles {
  std::vector<std::string> sources, learners, buffers;
};

/// Edges: ports exist on the kinds and carry the same type. Returns who feeds whom (a service's
/// user feeds its server: the server is driven by its users' requests).
std::map<std::string, std::set<std::string>> check_edges(schema::Graph::Reader graph,
                                                         const kinds_by_actor& kind_of,
                                                         const reporter& report);
roles roles_of(schema::Graph::Reader graph, const kinds_by_actor& kind_of);
void check_roles(schema::Graph::Reader graph, const roles& r, const reporter& report);
void check_buffer_edges(schema::Graph::Reader graph, const kinds_by_actor& kind_of,
                        const std::string& learner, const std::string& buffer,
                        const reporter& report);
void check_feed_capacity(schema::Graph::Reader graph, const kinds_by_actor& kind_of,
                         const std::string& feed, const reporter& report);
void check_reachable(schema::Graph::Reader graph, const std::vector<std::string>& sources,
                     std::map<std::string, std::set<std::string>>& downstream,
                     const reporter& report);
void check_in_graph(schema::Graph::Reader graph, const kinds_by_actor& kind_of,
                    const reporter& report);
void check_settings_agree(schema::Graph::Reader graph, const kinds_by_actor& kind_of,
                          const reporter& report);

}  // namespace milesrt::graph::shape
