#pragma once
/// vanilla_pg: the plain policy-gradient (REINFORCE) surrogate, a policy loss the built-ins lack:
/// per token pg = -A * logp, with no ratio and no clip, aggregated like every policy loss.

#include <memory>

#include "actors/lib/rl/policy_loss.hpp"

namespace milesrt::examples {

std::unique_ptr<rl::policy_loss> make_vanilla_pg();

}  // namespace milesrt::examples
