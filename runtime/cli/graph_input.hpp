#pragma once
/// Reading the graph file named on a command line, shared by the graph-taking subcommands.

#include <memory>
#include <string>

#include "runtime/cli/command.hpp"
#include "runtime/graph/loader.hpp"

namespace milesrt::cli {

/// Loads and structurally validates `file`. On failure prints one line per problem to ctx.err
/// and returns null; the caller then exits with exit_status::bad_input.
std::unique_ptr<graph::loaded_graph> load_checked_graph(const std::string& file, context& ctx,
                                                        std::string_view cmd);

/// "6 actors, 6 edges, sync schedule, 100 steps": a one-line summary of a graph.
std::string describe(const graph::loaded_graph& g);

}  // namespace milesrt::cli
