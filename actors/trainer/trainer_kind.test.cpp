// The trainer kind's params check: the open sets (estimator, policyLoss) are names in the loss
// registries, and an unknown one is reported with the known names.
#include "actors/trainer/trainer_kind.hpp"

#include <gtest/gtest.h>

#include <limits>

#include "actors/lib/llm/tiny_model_testing.hpp"
#include "actors/lib/rl/builtin.hpp"
#include "milesrt/trainer.capnp.h"
#include "runtime/testing/kind_testing.hpp"

namespace milesrt::trainer {
namespace {
using kind_testing::params_of;

std::vector<std::string> problems_of(const runtime::kind_registry& kinds,
                                     params_of<schema::TrainerParams>& p) {
  std::vector<std::string> out;
  for (const auto& problem : kinds.find("trainer")->check_params(*p.setup().params_struct))
    out.push_back(problem.text());
  return out;
}

TEST(TrainerKind, UnknownEstimatorAndPolicyLossListTheKnownNames) {
  runtime::kind_registry kinds;
  register_trainer_kind(kinds);
  params_of<schema::TrainerParams> p;
  p->setModel(llm::testing::tiny_model_folder());
  EXPECT_TRUE(problems_of(kinds, p).empty());
  p->setEstimator("grpo2");
  p->setPolicyLoss("sequence");
  auto problems = problems_of(kinds, p);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0],
            "estimator: 'grpo2' is not one of: dr_grpo, gae, grpo, reinforce_pp, "
            "reinforce_pp_baseline, rloo");
  EXPECT_EQ(problems[1], "policyLoss: 'sequence' is not one of: gspo, ppo");
  p->setEstimator("gae");
  p->setPolicyLoss("gspo");
  EXPECT_TRUE(problems_of(kinds, p).empty());
}

// A number that is not finite (lr = inf) is refused by validation, naming the field, instead of
// reaching the optimizer.
TEST(TrainerKind, NumbersMustBeFinite) {
  runtime::kind_registry kinds;
  register_trainer_kind(kinds);
  params_of<schema::TrainerParams> p;
  p->setModel(llm::testing::tiny_model_folder());
  p->setLr(std::numeric_limits<double>::infinity());
  p->setKlCoef(std::numeric_limits<double>::quiet_NaN());
  auto problems = problems_of(kinds, p);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0], "klCoef: must be a finite number");
  EXPECT_EQ(problems[1], "lr: must be a finite number");
}

// AdamW's epsilon keeps its division away from 0 / 0 (a parameter that never had a gradient).
TEST(TrainerKind, AdamEpsMustBePositive) {
  runtime::kind_registry kinds;
  register_trainer_kind(kinds);
  params_of<schema::TrainerParams> p;
  p->setModel(llm::testing::tiny_model_folder());
  for (double eps : {0.0, -1e-8}) {
    p->setAdamEps(eps);
    auto problems = problems_of(kinds, p);
    ASSERT_EQ(problems.size(), 1u) << eps;
    EXPECT_EQ(problems[0], "adamEps: must be > 0");
  }
  p->setAdamEps(1e-6);
  EXPECT_TRUE(problems_of(kinds, p).empty());
}

TEST(TrainerKind, APluginLossIsAKnownName) {
  auto losses = std::make_shared<rl::registries>(rl::builtin_registries());
  losses->policy_losses.add("ppo_again", rl::make_ppo_loss);
  runtime::kind_registry kinds;
  register_trainer_kind(kinds, losses);
  params_of<schema::TrainerParams> p;
  p->setModel(llm::testing::tiny_model_folder());
  p->setPolicyLoss("ppo_again");
  EXPECT_TRUE(problems_of(kinds, p).empty());
}

}  // namespace
}  // namespace milesrt::trainer
