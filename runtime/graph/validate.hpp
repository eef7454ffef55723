#pragma once
/// Checks on a graph that need no knowledge of actor kinds: names, edge endpoints, run section.

#include <string>
#include <vector>

#include "runtime/graph/loader.hpp"

namespace milesrt::graph {

/// An edge endpoint, "actor.port" split in two.
struct endpoint {
  std::string actor;
  std::string port;
};

/// Splits "actor.port"; false when the text is not of that form.
bool parse_endpoint(const std::string& text, endpoint& out);

/// Every structural problem of `g`, each naming the file, the actor or edge, and the field.
/// Empty when the graph is well formed. Kind-dependent checks (ports, params) come on top of this.
std::vector<diagnostic> validate_structure(const loaded_graph& g);

}  // namespace milesrt::graph
