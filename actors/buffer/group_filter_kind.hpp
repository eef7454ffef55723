#pragma once
/// The `group_filter` actor kind: a stage between reward and trainer. With dynamic sampling it
/// drops groups whose rewards are all equal, which carry no GRPO signal (the schedule driver
/// samples more prompts until the batch is full). In and out: "groups" (llm.scored_group).

#include "runtime/core/kind.hpp"

namespace milesrt::buffer {

/// Adds the `group_filter` kind to the registry.
void register_group_filter_kind(runtime::kind_registry& registry);

}  // namespace milesrt::buffer
