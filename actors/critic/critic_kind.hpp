#pragma once
/// The `critic` actor kind: PPO's value model (critic_core), a second learner of the graph.
///   in "groups" (llm.scored_group, item by item): sets each sample's `values` (one per output
///      token) and emits the group on "groups" — for the trainer's gae estimator;
///   in "train" (llm.scored_group, a learner's batch port): the groups the trainer gets (an edge
///      of its own from the filter); each step the driver trains it on those of the policy's batch,
///      beside the trainer: every `trainBatch` of them make one critic optimizer step. Emits
///      nothing.
/// Params: CriticParams (schemas/critic.capnp). Checkpoints: the model and value head (an HF folder
/// with value_head.safetensors), the optimizer state, and its version.

#include "runtime/core/kind.hpp"

namespace milesrt::critic {

/// Registers the kind "critic" and the message types it carries.
void register_critic_kind(runtime::kind_registry& registry);

}  // namespace milesrt::critic
