#pragma once
/// The `environment` actor kind (a stage: prompts in, sample groups with masks and rewards out;
/// it uses a `generate` service): multi-turn episodes of an environment the graph names, from
/// `registry` (the built-ins and what plugins added).

#include <memory>

#include "actors/environment/environment.hpp"
#include "runtime/core/kind.hpp"

namespace milesrt::environment {

void register_environment_kind(runtime::kind_registry& registry,
                               std::shared_ptr<const environment_registry> environments);

}  // namespace milesrt::environment
