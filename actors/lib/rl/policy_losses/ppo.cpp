// ppo: the clipped surrogate of the per-token ratio exp(logp - old): PPO's clip, DAPO's
// clip-higher (eps_clip_high) and the dual clip for negative advantages (dual_clip_c).
#include "actors/lib/rl/builtin.hpp"
#include "actors/lib/rl/policy_loss.hpp"

namespace milesrt::rl {
namespace {

class ppo final : public policy_loss {
 public:
  at::Tensor surrogate(policy_loss_context& c) const override {
    return clipped_surrogate(c, token_ratio(c));
  }
};

}  // namespace

std::unique_ptr<policy_loss> make_ppo_loss() { return std::make_unique<ppo>(); }

}  // namespace milesrt::rl
