#include "runtime/core/plugins.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <set>
#include <sstream>

namespace milesrt::runtime {
namespace fs = std::filesystem;

std::vector<fs::path> plugin_candidates(const std::string& name, const fs::path& graph_file) {
  fs::path p(name);
  if (p.is_absolute()) return {p};
  std::vector<fs::path> out;
  out.push_back(graph_file.parent_path() / p);
  if (const char* env = std::getenv("MILESRT_PLUGIN_PATH")) {
    std::stringstream list(env);
    for (std::string dir; std::getline(list, dir, ':');)
      if (!dir.empty()) out.push_back(fs::path(dir) / p);
  }
  std::error_code ec;
  auto exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) out.push_back(exe.parent_path() / "plugins" / p);
  return out;
}

std::string load_plugin_file(const fs::path& path, plugin_context ctx) {
  if (!fs::is_regular_file(path)) return "plugin " + path.string() + " not found";
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return "cannot load plugin " + path.string() + ": " + dlerror();
  auto init = reinterpret_cast<plugin_init_fn>(dlsym(handle, plugin_init_symbol));
  if (init == nullptr) return "plugin " + path.string() + " exports no " + plugin_init_symbol;
  try {
    init(&ctx);
  } catch (const std::exception& e) {
    return "plugin " + path.string() + ": initialisation failed: " + e.what();
  }
  // The library stays loaded for the life of the process: its kinds' code runs until the end.
  return "";
}

problem_list load_plugins(const graph::loaded_graph& g, plugin_context ctx) {
  problem_list errors;
  std::set<std::string> loaded;
  for (auto name_reader : g.reader().getPlugins()) {
    std::string name = name_reader;
    const std::string file = g.file().string(), where = "plugin '" + name + "'";
    fs::path found;
    std::string tried;
    for (const auto& c : plugin_candidates(name, g.file())) {
      tried += (tried.empty() ? "" : ", ") + c.string();
      if (fs::is_regular_file(c)) {
        found = c;
        break;
      }
    }
    if (found.empty()) {
      errors.push_back(place_problem(file, where, "not found (looked at " + tried + ")"));
      continue;
    }
    auto key = fs::weakly_canonical(found).string();
    if (!loaded.insert(key).second) continue;
    auto error = load_plugin_file(key, ctx);
    if (!error.empty()) errors.push_back(place_problem(file, where, error));
  }
  return errors;
}

}  // namespace milesrt::runtime
