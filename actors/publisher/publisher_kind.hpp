#pragma once
/// The `publisher` actor kind: takes each version the trainer announces and makes it reach the
/// rollout engines by the transport the graph file names.

#include "runtime/core/kind.hpp"

namespace milesrt::publisher {

/// Registers the kind "publisher" and the weight messages' types.
void register_publisher_kind(runtime::kind_registry& registry);

}  // namespace milesrt::publisher
