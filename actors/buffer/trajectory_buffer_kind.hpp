#pragma once
/// The `trajectory_buffer` actor kind: the buffer between scoring and learning. The driver puts
/// every scored group into it and takes the learner's batches from it; its policy (a registry
/// name: fifo, staleness, priority, or a plugin's) decides which groups make a batch and which are
/// discarded. Its groups and counters are in checkpoints. In: "groups"; out: "groups" (to the
/// learner), both llm.scored_group.

#include <memory>

#include "actors/buffer/buffer_policy.hpp"
#include "runtime/core/kind.hpp"

namespace milesrt::buffer {

/// Adds the `trajectory_buffer` kind; its policies are looked up in `policies` (which plugins may
/// extend before graphs are validated).
void register_trajectory_buffer_kind(runtime::kind_registry& registry,
                                     std::shared_ptr<const policy_registry> policies);

}  // namespace milesrt::buffer
