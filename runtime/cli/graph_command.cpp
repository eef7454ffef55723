#include <CLI/CLI.hpp>
#include <caf/actor_system_config.hpp>
#include <ostream>

#include "runtime/cli/command.hpp"
#include "runtime/cli/graph_input.hpp"
#include "runtime/graph/dot.hpp"

namespace milesrt::cli {

namespace {

struct graph_options {
  std::string file;
  bool dot = false;
};

exit_status graph_command(const graph_options& opt, context& ctx) {
  // Drawing needs a well-formed graph, not runnable kinds.
  caf::actor_system_config config;
  auto prepared = prepare_graph(opt.file, {}, ctx, "graph", false, config);
  if (!prepared) return exit_status::bad_input;
  const auto& g = prepared->graph;
  if (opt.dot) {
    ctx.out << graph::to_dot(*g);
    return exit_status::ok;
  }
  auto r = g->reader();
  ctx.out << "graph " << std::string(r.getName()) << ": " << describe(*g) << "\n";
  for (auto a : r.getActors()) {
    ctx.out << "  actor " << std::string(a.getName()) << " : " << std::string(a.getKind());
    if (a.getReplicas() > 1) ctx.out << " x" << a.getReplicas();
    if (a.getPlacement().size() > 0) ctx.out << " @" << std::string(a.getPlacement());
    ctx.out << "\n";
  }
  for (auto e : r.getEdges()) {
    ctx.out << "  edge  " << std::string(e.getFrom()) << " -> " << std::string(e.getTo()) << "\n";
  }
  return exit_status::ok;
}

}  // namespace

command make_graph_command() {
  return {"graph", "Print a graph file: a summary, or Graphviz with --dot",
          [](CLI::App& app, context& ctx) -> runner {
            auto opt = std::make_shared<graph_options>();
            app.add_option("graph", opt->file, "Graph file (.capnp)")->required();
            app.add_flag("--dot", opt->dot, "Print Graphviz (pipe into `dot -Tsvg`)");
            return [opt, &ctx] { return graph_command(*opt, ctx); };
          }};
}

}  // namespace milesrt::cli
