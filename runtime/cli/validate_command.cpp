#include <CLI/CLI.hpp>
#include <caf/actor_system_config.hpp>
#include <ostream>

#include "runtime/cli/command.hpp"
#include "runtime/cli/graph_input.hpp"

namespace milesrt::cli {

namespace {

struct validate_options {
  std::string file;
  std::vector<std::string> sets;
};

exit_status validate_command(const validate_options& opt, context& ctx) {
  caf::actor_system_config config;
  auto g = prepare_graph(opt.file, opt.sets, ctx, "validate", true, config);
  if (!g) return exit_status::bad_input;
  ctx.out << opt.file << ": ok (" << describe(*g->graph) << ")\n";
  return exit_status::ok;
}

}  // namespace

command make_validate_command() {
  return {"validate",
          "Check a graph file (syntax, kinds, ports, parameters) without starting anything",
          [](CLI::App& app, context& ctx) -> runner {
            auto opt = std::make_shared<validate_options>();
            app.add_option("graph", opt->file, "Graph file (.capnp) declaring `const graph :Graph`")
                ->required();
            app.add_option("--set", opt->sets, "Override: actor.param=value or run.field=value");
            return [opt, &ctx] { return validate_command(*opt, ctx); };
          }};
}

}  // namespace milesrt::cli
