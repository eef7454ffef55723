#pragma once
/// Toy actor kinds: a counting source, a stage that stamps items with the version it holds, and a
/// learner that sums what it trains on. They exercise the runtime without any model, in the tests
/// and as the example of custom kinds in a shared library (see plugin.cpp).

#include "runtime/core/kind.hpp"

namespace milesrt::toy {

/// Adds toy_source, toy_stage, toy_flaky_stage (restartable), toy_relay, toy_learner and
/// toy_buffer.
void register_kinds(runtime::kind_registry& registry);

}  // namespace milesrt::toy
