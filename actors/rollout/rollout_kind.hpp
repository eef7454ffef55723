#pragma once
/// The `rollout` actor kind: the rollout engine as a stage of a graph. In: prompts (one per group)
/// and weight versions; out: sample groups. Its params are schemas/rollout.capnp's RolloutParams.

#include "runtime/core/kind.hpp"

namespace milesrt::rollout {

/// Adds the `rollout` kind and its message types to the registry.
void register_rollout_kind(runtime::kind_registry& registry);

}  // namespace milesrt::rollout
