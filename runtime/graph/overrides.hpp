#pragma once
/// `--set target=value`: changes a graph after loading and before validation.

#include <optional>
#include <string>

#include "runtime/core/kind.hpp"
#include "runtime/graph/loader.hpp"

namespace milesrt::graph {

/// Applies one assignment. Targets:
///   run.<field>              a field of the run section (run.steps=3)
///   <actor>.<field>          a field of the actor's spec (replicas, placement, deadlineSeconds)
///   <actor>.<param>          a parameter: a field of the kind's params struct, or a declared
///                            custom parameter (added to the actor's list when absent)
/// Returns a problem naming the assignment when the target or the value is wrong; a field that
/// `renames` lists is named with its new name (rename_message).
std::optional<problem> apply_override(loaded_graph& g, const runtime::kind_registry& kinds,
                                      const std::string& assignment,
                                      const std::vector<renamed_field>& renames = {});

}  // namespace milesrt::graph
