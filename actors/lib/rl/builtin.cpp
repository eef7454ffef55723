#include "actors/lib/rl/builtin.hpp"

namespace milesrt::rl {

registries builtin_registries() {
  registries r;
  r.policy_losses.add("ppo", make_ppo_loss);
  r.policy_losses.add("gspo", make_gspo_loss);
  r.estimators.add("grpo", make_grpo_estimator);
  r.estimators.add("dr_grpo", make_dr_grpo_estimator);
  r.estimators.add("rloo", make_rloo_estimator);
  r.estimators.add("reinforce_pp", make_reinforce_pp_estimator);
  r.estimators.add("reinforce_pp_baseline", make_reinforce_pp_baseline_estimator);
  r.estimators.add("gae", make_gae_estimator);
  return r;
}

}  // namespace milesrt::rl
