#include "runtime/cli/graph_input.hpp"

#include <ostream>

#include "runtime/graph/validate.hpp"

namespace milesrt::cli {

std::unique_ptr<graph::loaded_graph> load_checked_graph(const std::string& file, context& ctx,
                                                        std::string_view cmd) {
  std::vector<std::filesystem::path> dirs(ctx.schema_dirs.begin(), ctx.schema_dirs.end());
  auto loaded = graph::load_graph(file, dirs);
  auto errors = loaded.errors;
  if (loaded.graph) {
    auto structural = graph::validate_structure(*loaded.graph);
    errors.insert(errors.end(), structural.begin(), structural.end());
  }
  if (errors.empty()) return std::move(loaded.graph);
  for (const auto& d : errors) print_error(ctx.err, cmd, d.text);
  return nullptr;
}

std::string describe(const graph::loaded_graph& g) {
  auto r = g.reader();
  auto schedule = r.getSchedule();
  std::string sched = schedule.isAsync()
                          ? "async schedule (maxStaleness " +
                                std::to_string(schedule.getAsync().getMaxStaleness()) + ")"
                          : "sync schedule";
  return std::to_string(r.getActors().size()) + " actors, " + std::to_string(r.getEdges().size()) +
         " edges, " + sched + ", " + std::to_string(r.getRun().getSteps()) + " steps";
}

}  // namespace milesrt::cli
