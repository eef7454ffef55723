#pragma once
/// The `trainer` actor kind: the graph's learner (RL on scored groups, or SFT on prompts).

#include <memory>

#include "runtime/core/kind.hpp"

namespace milesrt::rl {
struct registries;
}

namespace milesrt::trainer {

/// Registers the kind "trainer" and its message types, with the built-in policy losses and
/// advantage estimators.
void register_trainer_kind(runtime::kind_registry& registry);
/// The same with `losses`, whose names the params `policyLoss` and `estimator` are checked
/// against (a plugin's losses among them).
void register_trainer_kind(runtime::kind_registry& registry,
                           std::shared_ptr<const rl::registries> losses);

}  // namespace milesrt::trainer
