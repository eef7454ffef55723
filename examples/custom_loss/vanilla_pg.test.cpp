// The plugin's loss on one batch against a hand-computed figure, and the plugin loaded the way
// milesrt loads it, adding the loss to a program's registries.
#include "examples/custom_loss/vanilla_pg.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <caf/actor_system_config.hpp>

#include "actors/lib/rl/builtin.hpp"
#include "runtime/core/plugins.hpp"

namespace milesrt::examples {
namespace {

// Two sequences: tokens (logp, A, mask) = (-1, 2, 1), (-0.5, 2, 1), (-2, -1, 1), (-3, -1, 0).
// token_mean over the 3 unmasked tokens: (-(2)(-1) - (2)(-0.5) - (-1)(-2)) / 3 = (2 + 1 - 2) / 3 =
// 1/3. Its gradient in logp: -A / 3 on unmasked tokens, 0 on the masked one.
TEST(VanillaPg, LossAndGradientByHand) {
  auto loss = make_vanilla_pg();
  rl::policy_batch b;
  b.logprobs = at::tensor({-1.0f, -0.5f, -2.0f, -3.0f}).requires_grad_(true);
  b.old_logprobs = b.logprobs.detach();
  b.advantages = at::tensor({2.0f, 2.0f, -1.0f, -1.0f});
  b.mask = at::tensor({1.0f, 1.0f, 1.0f, 0.0f});
  b.seq_index = at::tensor({0, 0, 1, 1}, at::kLong);
  b.num_seqs = 2;
  auto r = loss->compute(b, rl::policy_loss_options{});
  EXPECT_NEAR(r.loss.item<double>(), 1.0 / 3.0, 1e-6);
  r.loss.backward();
  auto g = b.logprobs.grad();
  EXPECT_NEAR(g[0].item<double>(), -2.0 / 3.0, 1e-6);
  EXPECT_NEAR(g[1].item<double>(), -2.0 / 3.0, 1e-6);
  EXPECT_NEAR(g[2].item<double>(), 1.0 / 3.0, 1e-6);
  EXPECT_EQ(g[3].item<double>(), 0.0);
}

TEST(VanillaPg, ThePluginAddsTheLossToTheOfferedRegistries) {
  rl::registries losses = rl::builtin_registries();
  ASSERT_FALSE(losses.policy_losses.contains("vanilla_pg"));
  runtime::extension_points extensions;
  extensions.offer(rl::kRegistriesExtension, &losses);
  runtime::kind_registry kinds;
  caf::actor_system_config config;
  EXPECT_EQ(runtime::load_plugin_file(MILESRT_CUSTOM_LOSS_PLUGIN, {&kinds, &config, &extensions}),
            "");
  EXPECT_TRUE(losses.policy_losses.contains("vanilla_pg"));
  // Without the extension point the plugin says what is missing.
  rl::registries other = rl::builtin_registries();
  const auto error =
      runtime::load_plugin_file(MILESRT_CUSTOM_LOSS_PLUGIN, {&kinds, &config, nullptr});
  (void)other;
  EXPECT_NE(error.find("offers no RL registries"), std::string::npos) << error;
}

}  // namespace
}  // namespace milesrt::examples
