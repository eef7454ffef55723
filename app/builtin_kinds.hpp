#pragma once
/// The built-in actor kinds: the one place that names them all (runtime/ names none).

#include "runtime/core/kind.hpp"

namespace milesrt::app {

/// Adds every built-in kind, in the dataflow's order, to `kinds`.
void register_builtin_kinds(runtime::kind_registry& kinds);

}  // namespace milesrt::app
