#pragma once
/// An example of a custom reward kind, `length_reward`: a completion earns more the closer its
/// length (in tokens) is to a target. It has the ports of the built-in reward kinds, so it drops
/// into a graph in place of math_reward. Built as a plugin (plugin.cpp) that graph files name.

#include <cstdint>

#include "runtime/core/kind.hpp"

namespace milesrt::examples {

/// scale * max(0, 1 - |tokens - target| / target)
double length_score(uint64_t tokens, uint64_t target, double scale);

/// Adds `length_reward` (custom params: target_length, scale) and its message types.
void register_length_reward(runtime::kind_registry& registry);

}  // namespace milesrt::examples
