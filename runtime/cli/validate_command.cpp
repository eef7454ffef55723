#include <CLI/CLI.hpp>
#include <caf/actor_system_config.hpp>
#include <optional>
#include <ostream>

#include "runtime/cli/command.hpp"
#include "runtime/cli/graph_input.hpp"
#include "runtime/core/user_file.hpp"

namespace milesrt::cli {

namespace {

struct validate_options {
  std::string file;
  std::vector<std::string> sets;
  bool schema_only = false;
};

exit_status validate_command(const validate_options& opt, context& ctx) {
  caf::actor_system_config config;
  // --schema-only: the kinds' checks look at their params alone, not at the files they name.
  std::optional<runtime::named_files_unread> unread;
  if (opt.schema_only) unread.emplace();
  auto g = prepare_graph(opt.file, opt.sets, ctx, "validate", true, config);
  if (!g) return exit_status::bad_input;
  ctx.out << opt.file << ": ok (" << describe(*g->graph)
          << (opt.schema_only ? "; the files it names were not read" : "") << ")\n";
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
            app.add_flag("--schema-only", opt->schema_only,
                         "Check the schema, the structure and the kinds' params without reading "
                         "the files the graph names (model folders, datasets, templates)");
            return [opt, &ctx] { return validate_command(*opt, ctx); };
          }};
}

}  // namespace milesrt::cli
