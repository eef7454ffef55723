#pragma once
/// Toy actor kinds: a counting source, a stage that stamps items with the version it holds, and a
/// learner that sums what it trains on. They exercise the runtime without any model, in the tests
/// and as the example of custom kinds in a shared library (see plugin.cpp).

#include <string>

#include "runtime/core/kind.hpp"

namespace milesrt::toy {

/// Adds toy_source, toy_stage, toy_flaky_stage (restartable), toy_relay, toy_learner,
/// toy_buffer, and the service pair toy_doubler / toy_asker.
void register_kinds(runtime::kind_registry& registry);

/// Adds toy_doubler (serves `double`, type toy.double) and toy_asker (a stage of `item`s that
/// uses it, stamping them with the last `version` it got): toy_service_kinds.cpp.
void register_service_kinds(runtime::kind_registry& registry, const std::string& item,
                            const std::string& version);

}  // namespace milesrt::toy
