#pragma once
/// The RL library's built-in policy losses and advantage estimators, and the registries that
/// name them. The trainer kind builds `builtin_registries()` and passes it down; a plugin adds to
/// it with one call, e.g.
///   r.policy_losses.add("cispo", [] { return std::make_unique<my_cispo>(); });

#include <memory>

#include "actors/lib/rl/advantages.hpp"
#include "actors/lib/rl/policy_loss.hpp"

namespace milesrt::rl {

/// The named extension points of the RL library.
struct registries {
  policy_loss_registry policy_losses{"policy loss"};
  estimator_registry estimators{"estimator"};
};

/// The name under which milesrt offers plugins its registries (runtime/core/extensions.hpp): a
/// plugin adds a policy loss with
/// `ctx->extensions->get<rl::registries>(rl::kRegistriesExtension).policy_losses.add(name,
/// factory)`.
inline constexpr const char* kRegistriesExtension = "milesrt.rl.registries";

/// policy_losses: ppo, gspo; estimators: grpo, dr_grpo, rloo, reinforce_pp,
/// reinforce_pp_baseline, gae.
registries builtin_registries();

// One factory per built-in, each defined in its own file (policy_losses/, estimators/).
std::unique_ptr<policy_loss> make_ppo_loss();
std::unique_ptr<policy_loss> make_gspo_loss();
std::unique_ptr<advantage_estimator> make_grpo_estimator();
std::unique_ptr<advantage_estimator> make_dr_grpo_estimator();
std::unique_ptr<advantage_estimator> make_rloo_estimator();
std::unique_ptr<advantage_estimator> make_reinforce_pp_estimator();
std::unique_ptr<advantage_estimator> make_reinforce_pp_baseline_estimator();
std::unique_ptr<advantage_estimator> make_gae_estimator();

}  // namespace milesrt::rl
