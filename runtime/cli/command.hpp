#pragma once
/// The frame of the `milesrt` command line: exit statuses, the subcommand type, error lines.
/// Each subcommand lives in its own file and is registered by main.

#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace CLI {
class App;
}
namespace milesrt::runtime {
class kind_registry;
class extension_points;
}  // namespace milesrt::runtime
namespace milesrt::graph {
struct renamed_field;
}

namespace milesrt::cli {

/// Exit status of every milesrt command.
enum class exit_status : int {
  ok = 0,          ///< Did what was asked.
  run_failed = 1,  ///< The input was fine but the work failed (an actor died, a deadline passed).
  bad_input = 2,   ///< A bad command line, graph file, model folder or request; nothing started.
};

/// What every subcommand may use: output streams, where graph files import schemas from, and the
/// actor kinds built into this program (plugins add theirs per run).
struct context {
  std::ostream& out;
  std::ostream& err;
  std::vector<std::string> schema_dirs;
  const runtime::kind_registry* kinds = nullptr;
  /// Offered to plugins beside the kinds (runtime/core/extensions.hpp); null: none.
  const runtime::extension_points* extensions = nullptr;
  /// The fields the app's schemas renamed or removed (graph/loader.hpp); null: none.
  const std::vector<graph::renamed_field>* renames = nullptr;
  /// The first line of --help: what the executable is (the app says).
  std::string description = "milesrt: a graph of actors";
};

/// Runs a subcommand once its options are parsed.
using runner = std::function<exit_status()>;

/// A subcommand: its name, a one-line summary for --help, and `define`, which adds the
/// subcommand's options to the CLI11 app it is given and returns the runner that uses them.
struct command {
  std::string name;
  std::string summary;
  std::function<runner(CLI::App&, context&)> define;
};

/// Writes `milesrt <cmd>: error: <what>` as one line (newlines in `what` become "; ").
void print_error(std::ostream& err, std::string_view cmd, std::string_view what);

/// Runs the command line: parses `argv` with the given subcommands, runs the chosen one and returns
/// its exit status. `version` is printed by --version.
int run_main(int argc, char** argv, const std::vector<command>& commands, context& ctx,
             const std::function<std::string()>& version);

// The generic subcommands, one file each.
command make_run_command();       ///< run_command.cpp: `milesrt run G`
command make_validate_command();  ///< validate_command.cpp: `milesrt validate G`
command make_graph_command();     ///< graph_command.cpp: `milesrt graph G [--dot]`
command make_worker_command();    ///< worker_command.cpp: `milesrt worker --connect HOST:PORT`
command make_watch_command();     ///< watch_command.cpp: `milesrt watch RUN_DIR`

}  // namespace milesrt::cli
