#pragma once
/// The built-in actor kinds: the one place that names them all (runtime/ names none).

#include <memory>

#include "actors/buffer/buffer_policy.hpp"
#include "actors/environment/environment.hpp"
#include "runtime/core/kind.hpp"

namespace milesrt::rl {
struct registries;
}

namespace milesrt::app {

/// Adds every built-in kind, in the dataflow's order, to `kinds`; the trainer takes its policy
/// losses and advantage estimators from `losses`, the trajectory buffer its policies from
/// `buffer_policies`, the environment kind its environments from `environments` (plugins may add
/// to all three before a run starts).
void register_builtin_kinds(runtime::kind_registry& kinds,
                            std::shared_ptr<const rl::registries> losses,
                            std::shared_ptr<const buffer::policy_registry> buffer_policies,
                            std::shared_ptr<const environment::environment_registry> environments);

}  // namespace milesrt::app
