#pragma once
/// Reading the graph file named on a command line, shared by the graph-taking subcommands.

#include <caf/fwd.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/cli/command.hpp"
#include "runtime/core/kind.hpp"
#include "runtime/graph/loader.hpp"

namespace milesrt::cli {

/// A graph ready to run: loaded, plugins loaded, overrides applied, validated.
struct prepared_graph {
  std::unique_ptr<graph::loaded_graph> graph;
  runtime::kind_registry kinds;  ///< the built-in kinds plus the graph's plugins
};

/// Loads `file`, loads the plugins it names (registering their message types in `config`),
/// applies the `--set` assignments and validates: the structure always, kinds, ports, parameters
/// and drivability when `check_kinds`. On failure prints one line per problem to ctx.err and
/// returns nullopt; the caller then exits with exit_status::bad_input.
std::optional<prepared_graph> prepare_graph(const std::string& file,
                                            const std::vector<std::string>& sets, context& ctx,
                                            std::string_view cmd, bool check_kinds,
                                            caf::actor_system_config& config);

/// "6 actors, 6 edges, sync schedule, 100 steps": a one-line summary of a graph.
std::string describe(const graph::loaded_graph& g);

}  // namespace milesrt::cli
