// gspo (Group Sequence Policy Optimization): PPO's clipped surrogate of the sequence ratio
// s_i = exp(mean over the sequence's unmasked tokens of (logp - old)), which every token of the
// sequence carries as sg(s_i) * exp(logp_t - sg(logp_t)). GSPO's own normalization is the
// aggregation seq_mean_token_mean.
#include "actors/lib/rl/builtin.hpp"
#include "actors/lib/rl/policy_loss.hpp"

namespace milesrt::rl {
namespace {

class gspo final : public policy_loss {
 public:
  at::Tensor surrogate(policy_loss_context& c) const override {
    return clipped_surrogate(c, sequence_ratio(c));
  }
};

}  // namespace

std::unique_ptr<policy_loss> make_gspo_loss() { return std::make_unique<gspo>(); }

}  // namespace milesrt::rl
