#pragma once
/// The `data` actor kind: the source of a graph. It serves the prompts of a JSONL dataset
/// (schemas/data.capnp's DataParams) on its output port "prompts" (type "llm.prompt"), one prompt
/// per group, shuffled per epoch with a seeded stream, and keeps its position in checkpoints.

#include "runtime/core/kind.hpp"

namespace milesrt::data {

/// Adds the `data` kind to the registry.
void register_data_kind(runtime::kind_registry& registry);

}  // namespace milesrt::data
