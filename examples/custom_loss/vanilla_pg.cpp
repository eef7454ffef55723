#include "examples/custom_loss/vanilla_pg.hpp"

#include <ATen/ATen.h>

namespace milesrt::examples {
namespace {

class vanilla_pg final : public rl::policy_loss {
 public:
  at::Tensor surrogate(rl::policy_loss_context& c) const override { return -c.adv * c.logp; }
};

}  // namespace

std::unique_ptr<rl::policy_loss> make_vanilla_pg() { return std::make_unique<vanilla_pg>(); }

}  // namespace milesrt::examples
