#include <ostream>
#include <set>

#include <CLI/CLI.hpp>

#include "runtime/cli/command.hpp"
#include "runtime/cli/graph_input.hpp"

namespace milesrt::cli {

command make_run_command() {
  return {"run", "Run a graph file: start its actors and drive its schedule",
          [](CLI::App& app, context& ctx) -> runner {
            auto file = std::make_shared<std::string>();
            app.add_option("graph", *file, "Graph file (.capnp) declaring `const graph :Graph`")
                ->required();
            return [file, &ctx] {
              auto g = load_checked_graph(*file, ctx, "run");
              if (!g) return exit_status::bad_input;
              // The registry of actor kinds and the schedule driver come with the runtime issue;
              // until then say plainly that nothing can be started.
              std::set<std::string> kinds;
              for (auto a : g->reader().getActors()) kinds.insert(a.getKind());
              std::string list;
              for (const auto& k : kinds) list += (list.empty() ? "" : ", ") + k;
              print_error(ctx.err, "run",
                          *file + ": graph is well formed (" + describe(*g) +
                              ") but nothing was started: this build registers no actor kinds "
                              "yet (the graph needs: " + list + ")");
              return exit_status::bad_input;
            };
          }};
}

}  // namespace milesrt::cli
