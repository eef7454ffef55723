// The registries of policy losses and advantage estimators: built-in names, errors that list the
// known names, and a surrogate added by the caller computing through the shared pipeline.
#include "actors/lib/rl/registry.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "actors/lib/rl/builtin.hpp"

namespace milesrt::rl {
namespace {

TEST(Registry, BuiltinNamesAreSorted) {
  const auto r = builtin_registries();
  EXPECT_EQ(r.policy_losses.names(), (std::vector<std::string>{"gspo", "ppo"}));
  EXPECT_EQ(r.estimators.names(),
            (std::vector<std::string>{"dr_grpo", "gae", "grpo", "reinforce_pp",
                                      "reinforce_pp_baseline", "rloo"}));
  EXPECT_TRUE(r.estimators.make("gae")->needs_values());
  EXPECT_FALSE(r.estimators.make("grpo")->needs_values());
}

TEST(Registry, AnUnknownNameListsTheKnownOnes) {
  const auto r = builtin_registries();
  EXPECT_EQ(r.estimators.check("grpo"), "");
  EXPECT_EQ(r.estimators.check("grpo2"),
            "'grpo2' is not one of: dr_grpo, gae, grpo, reinforce_pp, reinforce_pp_baseline, rloo");
  EXPECT_EQ(r.estimators.try_make("grpo2"), nullptr);
  try {
    r.policy_losses.make("sequence");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "policy loss 'sequence' is not one of: gspo, ppo");
  }
}

TEST(Registry, ANameIsRegisteredOnce) {
  auto r = builtin_registries();
  EXPECT_THROW(r.policy_losses.add("ppo", make_ppo_loss), std::invalid_argument);
  EXPECT_THROW(r.policy_losses.add("", make_ppo_loss), std::invalid_argument);
  EXPECT_THROW(r.policy_losses.add("x", nullptr), std::invalid_argument);
}

/// REINFORCE without a ratio: pg = -A * logp (a surrogate a plugin might add).
class vanilla_pg final : public policy_loss {
 public:
  at::Tensor surrogate(policy_loss_context& c) const override { return -c.adv * c.logp; }
};

TEST(Registry, AnAddedSurrogateRunsThroughTheSharedTerms) {
  auto r = builtin_registries();
  r.policy_losses.add("vanilla_pg", [] { return std::make_unique<vanilla_pg>(); });
  EXPECT_EQ(r.policy_losses.check("vanilla_pg"), "");
  // logp {-1, -2, masked NaN}, A {1, -0.5, 7}: pg {1, -1}, token mean 0; entropy {1, 3}, coef
  // 0.1: -0.2. d/dlogp = -A/2 = {-0.5, 0.25}.
  policy_batch b;
  b.logprobs = at::tensor(std::vector<double>{-1, -2, NAN}, at::kDouble).requires_grad_();
  b.old_logprobs = b.logprobs.detach();
  b.advantages = at::tensor(std::vector<double>{1, -0.5, 7}, at::kDouble);
  b.entropy = at::tensor(std::vector<double>{1, 3, NAN}, at::kDouble);
  b.mask = at::tensor(std::vector<double>{1, 1, 0}, at::kDouble);
  b.seq_index = at::zeros({3}, at::kLong);
  policy_loss_options o;
  o.entropy_coef = 0.1;
  auto res = r.policy_losses.make("vanilla_pg")->compute(b, o);
  EXPECT_NEAR(res.loss.item<double>(), -0.2, 1e-12);
  EXPECT_NEAR(res.metrics.at("pg_loss"), 0, 1e-12);
  EXPECT_NEAR(res.metrics.at("entropy"), 2, 1e-12);
  EXPECT_EQ(res.metrics.count("pg_clipfrac"), 0u);  // no clip: the surrogate records none
  res.loss.backward();
  auto g = b.logprobs.grad();
  EXPECT_NEAR(g[0].item<double>(), -0.5, 1e-12);
  EXPECT_NEAR(g[1].item<double>(), 0.25, 1e-12);
  EXPECT_EQ(g[2].item<double>(), 0.0);
}

}  // namespace
}  // namespace milesrt::rl
