#pragma once
/// Checks on a graph that need no knowledge of actor kinds: names, edge endpoints, run section.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/graph/loader.hpp"

namespace milesrt::graph {

/// What validation accepts (docs/limits.md lists them): beyond them a run would overflow a
/// conversion, hold unbounded work or recurse too deep.
namespace limits {
constexpr size_t max_name = 128;           ///< characters of an actor's or a port's name
constexpr uint32_t max_replicas = 1024;    ///< replicas of one actor
constexpr uint64_t max_steps = 100000000;  ///< run.steps
constexpr uint32_t max_batch = 100000;     ///< run.batchSize
constexpr uint64_t max_window = 1000000;   ///< (maxStaleness + 1) x batchSize
constexpr double max_seconds = 1e7;        ///< every duration (deadlines, waits): ~115 days
constexpr size_t max_nesting = 64;         ///< nested brackets in a graph file
}  // namespace limits

/// An edge endpoint, "actor.port" split in two.
struct endpoint {
  std::string actor;
  std::string port;
};

/// Splits "actor.port"; false when the text is not of that form.
bool parse_endpoint(const std::string& text, endpoint& out);

/// Every structural problem of `g`, each naming the file, the actor or edge, and the field.
/// Empty when the graph is well formed. Kind-dependent checks (ports, params) come on top of this.
problem_list validate_structure(const loaded_graph& g);

}  // namespace milesrt::graph
