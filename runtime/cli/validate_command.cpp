#include <ostream>

#include <CLI/CLI.hpp>

#include "runtime/cli/command.hpp"
#include "runtime/cli/graph_input.hpp"

namespace milesrt::cli {

command make_validate_command() {
  return {"validate", "Check a graph file without starting anything",
          [](CLI::App& app, context& ctx) -> runner {
            auto file = std::make_shared<std::string>();
            app.add_option("graph", *file, "Graph file (.capnp) declaring `const graph :Graph`")
                ->required();
            return [file, &ctx] {
              auto g = load_checked_graph(*file, ctx, "validate");
              if (!g) return exit_status::bad_input;
              ctx.out << *file << ": ok (" << describe(*g) << ")\n";
              return exit_status::ok;
            };
          }};
}

}  // namespace milesrt::cli
