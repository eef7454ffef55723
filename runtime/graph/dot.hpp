#pragma once
/// Graphviz export of a graph file (`milesrt graph G --dot`).

#include <string>

#include "runtime/graph/loader.hpp"

namespace milesrt::graph {

/// The graph as a Graphviz digraph: one node per actor (name, kind, replicas), one arrow per edge
/// labelled with its ports, and the schedule in the title.
std::string to_dot(const loaded_graph& g);

}  // namespace milesrt::graph
