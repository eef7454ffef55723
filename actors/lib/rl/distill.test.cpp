// On-policy distillation's estimators against closed forms on a small distribution: the student's
// own tokens, enumerated in proportion to their probabilities (so that a token mean is the
// expectation over the student's samples), through the whole policy loss. Each estimator's value is
// the reverse KL(student || teacher) in expectation (k1, k3); k1's and k2's expected gradients are
// the reverse KL's, k3's the forward KL(teacher || student)'s. Masked tokens (a multi-turn
// trajectory's environment tokens, NaN teacher log-probs) change nothing.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "actors/lib/rl/builtin.hpp"
#include "actors/lib/rl/losses.hpp"
#include "actors/lib/rl/policy_loss.hpp"

namespace milesrt::rl {
namespace {

const std::vector<double> student_p = {0.5, 0.25, 0.125, 0.125};
const std::vector<double> teacher_p = {0.1, 0.2, 0.3, 0.4};
// Tokens in proportion to the student's probabilities (8 samples), then 2 masked tokens.
const std::vector<int64_t> tokens = {0, 0, 0, 0, 1, 1, 2, 3, 1, 2};
const std::vector<double> mask = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0};

double reverse_kl() {
  double kl = 0;
  for (size_t v = 0; v < student_p.size(); ++v)
    kl += student_p[v] * std::log(student_p[v] / teacher_p[v]);
  return kl;
}

struct run {
  double loss = 0;
  std::map<std::string, double> metrics;
  std::vector<double> grad;  // d loss / d student logits
};

run distill(kl_estimator k) {
  const auto logits = at::log(at::tensor(student_p, at::kDouble)).requires_grad_();
  const auto idx = at::tensor(tokens, at::kLong);
  const auto logp = at::log_softmax(logits, 0).index_select(0, idx);
  auto teacher = at::log(at::tensor(teacher_p, at::kDouble)).index_select(0, idx);
  teacher.index_put_({at::tensor(std::vector<int64_t>{8, 9}, at::kLong)}, NAN);
  policy_batch b;
  b.logprobs = logp;
  b.old_logprobs = logp.detach();
  b.teacher_logprobs = teacher;
  b.advantages = at::zeros({10}, at::kDouble);  // no reward: distillation alone
  b.mask = at::tensor(mask, at::kDouble);
  b.seq_index = at::arange(10, at::kLong);
  policy_loss_options o;
  o.distill_coef = 1;
  o.distill_kl = k;
  auto r = builtin_registries().policy_losses.make("ppo")->compute(b, o);
  r.loss.backward();
  const auto g = logits.grad().contiguous();
  return {r.loss.item<double>(), r.metrics, {g.data_ptr<double>(), g.data_ptr<double>() + 4}};
}

TEST(Distill, K1ValueAndGradientAreTheReverseKls) {
  const double kl = reverse_kl();
  const auto r = distill(kl_estimator::k1);
  EXPECT_NEAR(r.metrics.at("distill_kl_mean"), kl, 1e-12);
  EXPECT_NEAR(r.metrics.at("distill_logprob_gap"), -kl, 1e-12);
  for (size_t j = 0; j < 4; ++j) {
    // d KL(p || q) / d logit_j = p_j (log p_j - log q_j - KL)
    const double want = student_p[j] * (std::log(student_p[j] / teacher_p[j]) - kl);
    EXPECT_NEAR(r.grad[j], want, 1e-12) << "logit " << j;
  }
}

TEST(Distill, K3ValueIsTheReverseKlItsGradientTheForwardKls) {
  const auto r = distill(kl_estimator::k3);
  EXPECT_NEAR(r.metrics.at("distill_kl_mean"), reverse_kl(), 1e-12);
  EXPECT_NEAR(r.loss, reverse_kl(), 1e-12);
  // d KL(q || p) / d logit_j = p_j - q_j
  for (size_t j = 0; j < 4; ++j)
    EXPECT_NEAR(r.grad[j], student_p[j] - teacher_p[j], 1e-12) << "logit " << j;
}

TEST(Distill, K2GradientIsTheReverseKls) {
  const double kl = reverse_kl();
  const auto r = distill(kl_estimator::k2);
  double half_square = 0;
  for (size_t v = 0; v < 4; ++v)
    half_square += student_p[v] * 0.5 * std::pow(std::log(student_p[v] / teacher_p[v]), 2);
  EXPECT_NEAR(r.metrics.at("distill_kl_mean"), half_square, 1e-12);
  for (size_t j = 0; j < 4; ++j) {
    const double want = student_p[j] * (std::log(student_p[j] / teacher_p[j]) - kl);
    EXPECT_NEAR(r.grad[j], want, 1e-12) << "logit " << j;
  }
}

TEST(Distill, NoEstimatorIsRefused) {
  policy_batch b;
  b.logprobs = at::zeros({1}, at::kDouble);
  b.old_logprobs = b.teacher_logprobs = b.advantages = b.mask = b.logprobs;
  b.seq_index = at::zeros({1}, at::kLong);
  policy_loss_options o;
  o.distill_coef = 1;
  o.distill_kl = kl_estimator::none;
  EXPECT_THROW(builtin_registries().policy_losses.make("ppo")->compute(b, o), c10::Error);
}

}  // namespace
}  // namespace milesrt::rl
