#pragma once
/// Custom actor kinds from shared libraries named in a graph file's `plugins` list.
///
/// A plugin exports `extern "C" void milesrt_plugin_init(milesrt::runtime::plugin_context*)`,
/// which adds its kinds to the registry and its message types to the actor system's config
/// (type IDs from the plugin range, see messages.hpp). Plugins load before the actor system starts.

#include <caf/fwd.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/core/extensions.hpp"
#include "runtime/core/kind.hpp"
#include "runtime/graph/loader.hpp"

namespace milesrt::runtime {

struct plugin_context {
  kind_registry* kinds;
  caf::actor_system_config* config;
  /// The program's other extension points (null when it offers none).
  const extension_points* extensions = nullptr;
};

/// The symbol every plugin exports.
using plugin_init_fn = void (*)(plugin_context*);
constexpr const char* plugin_init_symbol = "milesrt_plugin_init";

/// Where a plugin named `name` is looked for: as given when absolute; else beside the graph file,
/// in each folder of $MILESRT_PLUGIN_PATH, and in the `plugins` folder beside the milesrt program.
std::vector<std::filesystem::path> plugin_candidates(const std::string& name,
                                                     const std::filesystem::path& graph_file);

/// Loads one plugin library and runs its init; returns an error line naming the file, or "".
std::string load_plugin_file(const std::filesystem::path& path, plugin_context ctx);

/// Loads every plugin of the graph (each once per process). Problems come back as problems that
/// name the graph file and the plugin.
problem_list load_plugins(const graph::loaded_graph& g, plugin_context ctx);

}  // namespace milesrt::runtime
