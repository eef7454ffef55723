#pragma once
/// The reward actor kinds: stages that set each sample's reward. In "groups" (llm.sample_group),
/// out "scored" (llm.scored_group).
///   math_reward    the final answer of sample.text against the group's label (MathRewardParams)
///   remote_reward  rewards from an HTTP server (RemoteRewardParams), in a detached actor

#include <vector>

#include "actors/lib/llm/messages.hpp"
#include "runtime/core/kind.hpp"
#include "runtime/core/messages.hpp"

namespace milesrt::reward {

/// Adds `math_reward` and `remote_reward` to the registry.
void register_reward_kinds(runtime::kind_registry& registry);

/// reward_mean and reward_std (population) of a group's samples; for reward kinds of plugins too.
runtime::metric_map reward_metrics(const std::vector<llm::sample_msg>& samples);

}  // namespace milesrt::reward
