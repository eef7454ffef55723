#include "runtime/cli/graph_input.hpp"

#include <caf/actor_system_config.hpp>
#include <ostream>

#include "runtime/core/plugins.hpp"
#include "runtime/graph/check_kinds.hpp"
#include "runtime/graph/overrides.hpp"
#include "runtime/graph/validate.hpp"

namespace milesrt::cli {
using graph_renames = std::vector<graph::renamed_field>;

std::optional<prepared_graph> prepare_graph(const std::string& file,
                                            const std::vector<std::string>& sets, context& ctx,
                                            std::string_view cmd, bool check_kinds,
                                            caf::actor_system_config& config) {
  // The first few errors, then a count: a broken line makes the parser report many more.
  auto fail = [&](const problem_list& errors) {
    constexpr size_t shown = 5;
    for (size_t i = 0; i < errors.size() && i < shown; ++i)
      print_error(ctx.err, cmd, errors[i].text());
    if (errors.size() > shown) {
      print_error(ctx.err, cmd,
                  file + ": " + std::to_string(errors.size() - shown) +
                      " more error(s) not shown (fix the first ones first)");
    }
    return std::nullopt;
  };
  std::vector<std::filesystem::path> dirs(ctx.schema_dirs.begin(), ctx.schema_dirs.end());
  auto loaded = ctx.renames != nullptr ? graph::load_graph(file, dirs, *ctx.renames)
                                       : graph::load_graph(file, dirs);
  if (!loaded.ok()) return fail(loaded.errors);

  prepared_graph out;
  out.graph = std::move(loaded.graph);
  if (ctx.kinds != nullptr) out.kinds = *ctx.kinds;
  auto errors = runtime::load_plugins(*out.graph, {&out.kinds, &config, ctx.extensions});
  if (!errors.empty()) return fail(errors);
  for (const auto& s : sets) {
    if (auto d = graph::apply_override(*out.graph, out.kinds, s,
                                       ctx.renames ? *ctx.renames : graph_renames{}))
      errors.push_back(*d);
  }
  if (!errors.empty()) return fail(errors);
  errors = graph::validate_structure(*out.graph);
  if (errors.empty() && check_kinds) errors = graph::validate_kinds(*out.graph, out.kinds);
  if (!errors.empty()) return fail(errors);
  return out;
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
