#pragma once
/// The `trainer` actor kind: the graph's learner (RL on scored groups, or SFT on prompts).

#include "runtime/core/kind.hpp"

namespace milesrt::trainer {

/// Registers the kind "trainer" and its message types.
void register_trainer_kind(runtime::kind_registry& registry);

}  // namespace milesrt::trainer
