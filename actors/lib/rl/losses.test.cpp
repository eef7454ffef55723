#include "actors/lib/rl/losses.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "actors/lib/rl/advantages.hpp"
#include "actors/lib/rl/builtin.hpp"
#include "actors/lib/rl/policy_loss.hpp"

namespace milesrt::rl {
namespace {

const double nan_v = std::numeric_limits<double>::quiet_NaN();
const double inf_v = std::numeric_limits<double>::infinity();

at::Tensor D(const std::vector<double>& v) { return at::tensor(v, at::kDouble); }
at::Tensor I(const std::vector<int64_t>& v) { return at::tensor(v, at::kLong); }

void expect_values(const at::Tensor& t, const std::vector<double>& want, double tol = 1e-12) {
  ASSERT_TRUE(t.defined());
  auto c = t.detach().to(at::kCPU, at::kDouble).contiguous();
  ASSERT_EQ(c.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(c.data_ptr<double>()[i], want[i], tol) << "element " << i;
}
double scalar(const at::Tensor& t) { return t.detach().to(at::kCPU, at::kDouble).item<double>(); }

const registries builtin = builtin_registries();
/// A built-in advantage estimator by name.
std::unique_ptr<advantage_estimator> E(const std::string& name) {
  return builtin.estimators.make(name);
}
/// The loss of a built-in policy loss (surrogate) by name.
loss_result loss_named(const std::string& name, const policy_batch& b,
                       const policy_loss_options& o) {
  return builtin.policy_losses.make(name)->compute(b, o);
}
loss_result ppo_loss(const policy_batch& b, const policy_loss_options& o) {
  return loss_named("ppo", b, o);
}
loss_result gspo_loss(const policy_batch& b, const policy_loss_options& o) {
  return loss_named("gspo", b, o);
}

/// A batch whose token i has ratio exp(logp - old) = ratio[i] (old = -1).
policy_batch ratio_batch(const std::vector<double>& ratio, const std::vector<double>& adv,
                         const std::vector<double>& mask, const std::vector<int64_t>& seq,
                         int64_t num_seqs) {
  std::vector<double> lp;
  for (double r : ratio) lp.push_back(-1 + std::log(r));
  policy_batch b;
  b.logprobs = D(lp).requires_grad_();
  b.old_logprobs = at::full({static_cast<int64_t>(ratio.size())}, -1.0, at::kDouble);
  b.advantages = D(adv);
  b.mask = D(mask);
  b.seq_index = I(seq);
  b.num_seqs = num_seqs;
  return b;
}
at::Tensor grad_of(const policy_batch& b, const loss_result& r) {
  r.loss.backward();
  return b.logprobs.grad();
}

TEST(Losses, ParsersNameTheBadValueAndTheAllowedOnes) {
  EXPECT_TRUE(builtin.estimators.contains("rloo"));
  EXPECT_TRUE(builtin.estimators.contains("reinforce_pp_baseline"));
  EXPECT_EQ(parse_kl("k3"), kl_estimator::k3);
  EXPECT_EQ(parse_aggregation("seq_mean_token_mean"), aggregation::seq_mean_token_mean);
  EXPECT_STREQ(to_string(aggregation::constant), "constant");
  try {
    builtin.estimators.make("ppo");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'ppo'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("reinforce_pp_baseline"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_kl("k4"), std::invalid_argument);
  EXPECT_THROW(parse_aggregation("mean"), std::invalid_argument);
}

// Groups (non-dense ids): A = {1, 0, 0, 1} (id 7), B = {0.5, 0.5} all equal (id 3), C = {3} alone
// (id 9), D = {2, 4, 6} (id 1).
const std::vector<double> rewards = {1, 0, 0, 1, 0.5, 0.5, 3, 2, 4, 6};
const std::vector<int64_t> groups = {7, 7, 7, 7, 3, 3, 9, 1, 1, 1};

TEST(Losses, GroupAdvantagesOfEachEstimator) {
  // grpo, eps 0: A: mean 0.5, deviations +-0.5, unbiased var = 4*0.25/3 = 1/3, std = 1/sqrt(3),
  // so +-0.5*sqrt(3) = +-0.8660254037844386; B all equal and C alone: 0; D: mean 4, var 8/2 = 4,
  // std 2: -1, 0, 1.
  const double h = 0.8660254037844386;
  expect_values(group_advantages(D(rewards), groups, *E("grpo"), 0.0),
                {h, -h, -h, h, 0, 0, 0, -1, 0, 1});
  // With eps 1e-6: 0.5 / (0.5773502691896258 + 1e-6) = 0.866023903...
  expect_values(group_advantages(D(rewards), groups, *E("grpo")), {h, -h, -h, h, 0, 0, 0, -1, 0, 1},
                2e-6);
  // dr_grpo and reinforce_pp_baseline: r - mean.
  const std::vector<double> centered = {0.5, -0.5, -0.5, 0.5, 0, 0, 0, -2, 0, 2};
  expect_values(group_advantages(D(rewards), groups, *E("dr_grpo")), centered);
  expect_values(group_advantages(D(rewards), groups, *E("reinforce_pp_baseline")), centered);
  // rloo: A: 1 - mean{0,0,1} = 2/3, 0 - mean{1,0,1} = -2/3; D: 2 - 5 = -3, 4 - 4 = 0, 6 - 3 = 3.
  expect_values(group_advantages(D(rewards), groups, *E("rloo")),
                {2. / 3, -2. / 3, -2. / 3, 2. / 3, 0, 0, 0, -3, 0, 3});
  expect_values(group_advantages(D(rewards), groups, *E("reinforce_pp")), rewards);
  EXPECT_THROW(group_advantages(D(rewards), groups, *E("gae")), std::invalid_argument);
  EXPECT_THROW(group_advantages(D({1, 2}), groups, *E("grpo")), c10::Error);
  EXPECT_EQ(group_advantages(D(rewards).to(at::kFloat), groups, *E("grpo")).scalar_type(),
            at::kFloat);
}

// Token layout of the token-level tests: seq 0 = tokens 0..3 (token 3 masked), seq 1 = tokens
// 4..5, seq 2 = token 6 (masked: a sequence with nothing to train on).
const std::vector<int64_t> seqs = {0, 0, 0, 0, 1, 1, 2};
const std::vector<double> tmask = {1, 1, 1, 0, 1, 1, 0};

TEST(Losses, TokenAdvantagesBroadcastGroupEstimators) {
  // One group {1, 0.5, 0}: mean 0.5, unbiased std 0.5, grpo (eps 0) = {1, 0, -1}.
  advantage_options o;
  o.eps = 0;
  auto r = token_advantages(*E("grpo"), D({1, 0.5, 0}), {0, 0, 0}, I({0, 0, 0, 0, 1, 1, 2}),
                            D({1, 1, 1, 0, 1, 1, 1}), {}, {}, o);
  expect_values(r.advantages, {1, 1, 1, 0, 0, 0, -1});
  expect_values(r.returns, {1, 1, 1, 0, 0, 0, -1});
  // rloo: 1 - 0.25, 0.5 - 0.5, 0 - 0.75
  r = token_advantages(*E("rloo"), D({1, 0.5, 0}), {0, 0, 0}, I({0, 2, 2}), D({1, 1, 0}), {}, {},
                       o);
  expect_values(r.advantages, {0.75, -0.75, 0});
}

TEST(Losses, ReinforcePlusPlusDiscountsAndWhitensWithThePopulationStd) {
  // rewards {1, 2, 5}; token rewards (token 3 and 6 masked, their values ignored); gamma 0.5.
  // seq 0: r = {0, 1, 0 + 1 (final reward on the last unmasked token)}: G2 = 1, G1 = 1 + 0.5 = 1.5,
  //        G0 = 0 + 0.75 = 0.75.   seq 1: r = {0, -1 + 2}: G5 = 1, G4 = 0.5.
  // Whitening over {0.75, 1.5, 1, 0.5, 1}: mean 0.95, deviations {-0.2, 0.55, 0.05, -0.45, 0.05},
  // sum of squares 0.55, POPULATION var 0.55/5 = 0.11, std 0.33166247903553997.
  advantage_options o;
  o.gamma = 0.5;
  o.eps = 0;
  const auto tr = D({0, 1, 0, 100, 0, -1, 7});
  auto r =
      token_advantages(*E("reinforce_pp"), D({1, 2, 5}), {0, 0, 1}, I(seqs), D(tmask), tr, {}, o);
  expect_values(r.returns, {0.75, 1.5, 1, 0, 0.5, 1, 0});
  expect_values(r.advantages, {-0.6030226891555273, 1.6583123951777001, 0.15075567228888181, 0,
                               -1.3568010505999364, 0.15075567228888181, 0});
  // Population std: the whitened values have mean square exactly 1 (Bessel's would give 0.8).
  EXPECT_NEAR(scalar(r.advantages.square().sum()) / 5, 1.0, 1e-12);

  // reinforce_pp_baseline: groups {0, 0} (mean 1.5: -0.5, 0.5) and {1} alone (0), broadcast
  // undiscounted, plus discounted token rewards: seq 0: {0.5, 1, 0} - 0.5 = {0, 0.5, -0.5};
  // seq 1: {-0.5, -1} + 0.5 = {0, -0.5}. Whitening {0, 0.5, -0.5, 0, -0.5}: mean -0.1,
  // deviations {0.1, 0.6, -0.4, 0.1, -0.4}, var 0.7/5 = 0.14, std 0.37416573867739417.
  const auto baseline = E("reinforce_pp_baseline");
  r = token_advantages(*baseline, D({1, 2, 5}), {0, 0, 1}, I(seqs), D(tmask), tr, {}, o);
  expect_values(r.returns, {0, 0.5, -0.5, 0, 0, -0.5, 0});
  expect_values(r.advantages, {0.2672612419124244, 1.6035674514745462, -1.0690449676496976, 0,
                               0.2672612419124244, -1.0690449676496976, 0});
  // Without token rewards: {-0.5 x3, 0.5 x2}: mean (-1.5 + 1)/5 = -0.1, deviations -0.4 and 0.6,
  // var (3*0.16 + 2*0.36)/5 = 0.24.
  r = token_advantages(*baseline, D({1, 2, 5}), {0, 0, 1}, I(seqs), D(tmask), {}, {}, o);
  const double s = std::sqrt(0.24);
  expect_values(r.advantages, {-0.4 / s, -0.4 / s, -0.4 / s, 0, 0.6 / s, 0.6 / s, 0});
}

TEST(Losses, GaeSkipsMaskedTokensAndStopsAtTheSequenceEnd) {
  // gamma = lambda = 0.5 (gamma*lambda = 0.25), rewards {1, 2, 5}, V = {0.5, 1, 0.25, 9*, 1, 0.5,
  // 3*}. seq 0: t2: delta = 1 + 0 - 0.25 = 0.75, A = 0.75, R = 1.
  //        t1: delta = 0 + 0.5*0.25 - 1 = -0.875, A = -0.875 + 0.25*0.75 = -0.6875, R = 0.3125.
  //        t0: delta = 0 + 0.5*1 - 0.5 = 0, A = 0.25*-0.6875 = -0.171875, R = 0.328125.
  // seq 1: t5: delta = 2 - 0.5 = 1.5, A = 1.5, R = 2. t4: delta = 0.25 - 1 = -0.75,
  //        A = -0.75 + 0.375 = -0.375, R = 0.625.
  advantage_options o;
  const auto gae = E("gae");
  o.gamma = 0.5;
  o.lambda = 0.5;
  const auto v = D({0.5, 1, 0.25, 9, 1, 0.5, 3});
  auto r = token_advantages(*gae, D({1, 2, 5}), {0, 0, 1}, I(seqs), D(tmask), {}, v, o);
  expect_values(r.advantages, {-0.171875, -0.6875, 0.75, 0, -0.375, 1.5, 0});
  expect_values(r.returns, {0.328125, 0.3125, 1, 0, 0.625, 2, 0});
  EXPECT_THROW(token_advantages(*gae, D({1, 2, 5}), {0, 0, 1}, I(seqs), D(tmask), {}, {}, o),
               c10::Error);
  EXPECT_THROW(
      token_advantages(*gae, D({1, 2, 5}), {0, 0, 1}, I({0, 0, 0, 0, 1, 1, 3}), D(tmask), {}, v, o),
      c10::Error);
}

TEST(Losses, KlEstimators) {
  // logp - ref = {0.5, -1}; k3 with d = ref - logp = {-0.5, 1}: exp(-0.5) - 1 + 0.5 =
  // 0.10653065971263342, e - 2 = 0.7182818284590451.
  const auto lp = D({-1, -2}), ref = D({-1.5, -1});
  expect_values(kl_per_token(lp, ref, kl_estimator::k1), {0.5, -1});
  expect_values(kl_per_token(lp, ref, kl_estimator::k2), {0.125, 0.5});
  expect_values(kl_per_token(lp, ref, kl_estimator::k3), {0.10653065971263342, 0.7182818284590451});
  expect_values(kl_per_token(lp, ref, kl_estimator::none), {0, 0});
}

TEST(Losses, PpoClipCasesAndNormalizers) {
  // a: A=+1, ratio 1.5 -> max(-1.5, -1.2) = -1.2 (clipped); b: A=+1, 0.5 -> max(-0.5, -0.8) = -0.5;
  // c: A=-1, 1.5 -> max(1.5, 1.2) = 1.5; d: A=-1, 0.5 -> max(0.5, 0.8) = 0.8 (clipped);
  // e: A=2, 1.1 -> -2.2; f: masked with NaN garbage. Sum -1.6.
  auto b = ratio_batch({1.5, 0.5, 1.5, 0.5, 1.1, 1}, {1, 1, -1, -1, 2, nan_v}, {1, 1, 1, 1, 1, 0},
                       {0, 0, 0, 1, 1, 1}, 2);
  b.old_logprobs[5] = nan_v;
  b.global_tokens = 10;  // the step has 10 tokens: this micro-batch contributes -1.6/10
  auto r = ppo_loss(b, {});
  EXPECT_NEAR(scalar(r.loss), -0.16, 1e-12);
  EXPECT_NEAR(r.metrics.at("pg_loss"), -0.32, 1e-12);
  EXPECT_NEAR(r.metrics.at("pg_clipfrac"), 0.4, 1e-12);
  // ppo_kl = mean(old - new) = -(2 ln 0.75 + ln 1.1)/5.
  EXPECT_NEAR(r.metrics.at("ppo_kl"), 0.09601079301984737, 1e-12);
  // d/dlogp of -A*ratio/10 where unclipped: b -0.05, c 0.15, e -0.22.
  expect_values(grad_of(b, r), {0, -0.05, 0.15, 0, -0.22, 0});

  // Clip-higher: [0.8, 1.28]: ratio 1.5, A=1 -> -1.28; 1.25, A=1 -> -1.25 (inside 1.28); 0.5,
  // A=-1 -> 0.8. Mean over the local 3 tokens: -1.73/3.
  b = ratio_batch({1.5, 1.25, 0.5}, {1, 1, -1}, {1, 1, 1}, {0, 0, 0}, 1);
  policy_loss_options o;
  o.eps_clip_high = 0.28;
  r = ppo_loss(b, o);
  EXPECT_NEAR(scalar(r.loss), -1.73 / 3, 1e-12);
  EXPECT_NEAR(r.metrics.at("pg_clipfrac"), 2. / 3, 1e-12);
  expect_values(grad_of(b, r), {0, -1.25 / 3, 0});
}

TEST(Losses, DualClipBoundsNegativeAdvantages) {
  // c = 3: A=-1, ratio 4: max(4, 1.2) = 4 -> min(4, 3) = 3; A=-1, ratio 2: 2; A=+1, ratio 4:
  // max(-4, -1.2) = -1.2 (no dual clip for A > 0); A=-2, ratio 0.5: max(1, 1.6) = 1.6 < 6.
  // Sum 5.4, mean 1.35. Clipped (pg2 > pg1): tokens 3 and 4; dual-clipped: token 1.
  auto b = ratio_batch({4, 2, 4, 0.5}, {-1, -1, 1, -2}, {1, 1, 1, 1}, {0, 0, 1, 1}, 2);
  policy_loss_options o;
  o.dual_clip_c = 3;
  auto r = ppo_loss(b, o);
  EXPECT_NEAR(scalar(r.loss), 1.35, 1e-12);
  EXPECT_NEAR(r.metrics.at("pg_clipfrac"), 0.5, 1e-12);
  EXPECT_NEAR(r.metrics.at("pg_clipfrac_lower"), 0.25, 1e-12);
  expect_values(grad_of(b, r), {0, 0.5, 0, 0});  // only token 2 is unclipped: -A*ratio/4 = 2/4
}

TEST(Losses, AggregationsOverEmptyAndMaskedSequences) {
  // ratio 1, so pg = -A = {1, 2, 0*, 0*, 0*, 4} (* masked). seq 0 = tokens 0..2 (2 unmasked),
  // seq 1 = tokens 3..4 all masked, seq 2 has no tokens, seq 3 = token 5. S = 4.
  auto make = [] {
    auto b = ratio_batch({1, 1, 1, 1, 1, 1}, {-1, -2, 9, 5, 6, -4}, {1, 1, 0, 0, 0, 1},
                         {0, 0, 0, 1, 1, 3}, 4);
    b.global_tokens = 6;
    b.global_seqs = 4;
    return b;
  };
  struct expectation {
    aggregation agg;
    double loss;
    std::vector<double> grad;
  };
  const std::vector<expectation> cases = {
      {aggregation::token_mean, 7. / 6, {1. / 6, 2. / 6, 0, 0, 0, 4. / 6}},
      {aggregation::seq_mean_token_sum, 7. / 4, {0.25, 0.5, 0, 0, 0, 1}},
      // (1.5 + 0 + 0 + 4) / 4; grad of token 0 = 1 * (1/2) / 4.
      {aggregation::seq_mean_token_mean, 5.5 / 4, {0.125, 0.25, 0, 0, 0, 1}},
      // sum / (2 * 4)
      {aggregation::constant, 7. / 8, {0.125, 0.25, 0, 0, 0, 0.5}},
  };
  for (const auto& c : cases) {
    auto b = make();
    policy_loss_options o;
    o.agg = c.agg;
    o.constant_normalizer = 2;
    auto r = ppo_loss(b, o);
    EXPECT_NEAR(scalar(r.loss), c.loss, 1e-12) << to_string(c.agg);
    expect_values(grad_of(b, r), c.grad);
  }
}

policy_loss_options everything_on() {
  policy_loss_options o;
  o.dual_clip_c = 3;
  o.kl = kl_estimator::k3;
  o.kl_coef = 0.1;
  o.entropy_coef = 0.01;
  o.tis = true;
  o.mis = mis_level::sequence;
  o.distill_coef = 0.5;
  o.agg = aggregation::seq_mean_token_mean;
  return o;
}

TEST(Losses, EmptyAndFullyMaskedBatchesGiveADifferentiableZero) {
  for (const char* name : {"ppo", "gspo"}) {
    for (int64_t n : {0, 3}) {
      policy_batch b;
      b.logprobs = at::full({n}, n ? -inf_v : 0.0, at::kDouble).requires_grad_();
      b.old_logprobs = at::full({n}, nan_v, at::kDouble);
      b.rollout_logprobs = at::full({n}, inf_v, at::kDouble);
      b.ref_logprobs = at::full({n}, nan_v, at::kDouble);
      b.teacher_logprobs = at::full({n}, nan_v, at::kDouble);
      b.advantages = at::full({n}, nan_v, at::kDouble);
      b.entropy = at::full({n}, nan_v, at::kDouble).requires_grad_();
      b.mask = at::zeros({n}, at::kDouble);
      b.seq_index = at::zeros({n}, at::kLong);
      for (auto agg : {aggregation::token_mean, aggregation::seq_mean_token_mean}) {
        auto o = everything_on();
        o.agg = agg;
        auto r = loss_named(name, b, o);
        EXPECT_EQ(scalar(r.loss), 0.0);
        r.loss.backward();
        EXPECT_TRUE(b.logprobs.grad().defined());
        EXPECT_EQ(scalar(b.logprobs.grad().abs().sum()), 0.0);  // NaN would fail this
        EXPECT_EQ(scalar(b.entropy.grad().abs().sum()), 0.0);
        for (const auto& [k, v] : r.metrics) EXPECT_EQ(v, 0.0) << k;
        b.logprobs.mutable_grad().reset();
        b.entropy.mutable_grad().reset();
      }
    }
  }
  EXPECT_EQ(scalar(sft_loss(at::zeros({0}, at::kDouble), at::zeros({0}, at::kDouble), 0)), 0.0);
  EXPECT_EQ(
      scalar(value_loss(at::zeros({0}), at::zeros({0}), at::zeros({0}), at::zeros({0}), 0.2, 0)),
      0.0);
}

TEST(Losses, GspoUsesTheSequenceRatioWithStopGradient) {
  // seq 0: log ratios {0.1, 0.3} (+ a masked 5): s0 = exp(0.2) = 1.2214 > 1.2, A = 1: both tokens
  // -1.2, clipped, no gradient. seq 1: {-0.1, 0, -0.2}: s1 = exp(-0.1) = 0.9048374180359595,
  // A = -1: pg = s1 on each token, unclipped; d/dlogp_t of -A*sg(s1)*exp(logp_t - sg(logp_t)) = s1.
  auto b =
      ratio_batch({std::exp(0.1), std::exp(0.3), std::exp(5.0), std::exp(-0.1), 1, std::exp(-0.2)},
                  {1, 1, 1, -1, -1, -1}, {1, 1, 0, 1, 1, 1}, {0, 0, 0, 1, 1, 1}, 2);
  policy_loss_options o;
  auto r = gspo_loss(b, o);
  const double s1 = 0.9048374180359595;
  EXPECT_NEAR(scalar(r.loss), (-2.4 + 3 * s1) / 5, 1e-12);  // 0.06290245082157578
  EXPECT_NEAR(r.metrics.at("pg_clipfrac"), 0.4, 1e-12);
  expect_values(grad_of(b, r), {0, 0, 0, s1 / 5, s1 / 5, s1 / 5});
  // GSPO's own normalization: the mean over sequences of token means: (-1.2 + s1)/2.
  b.logprobs.mutable_grad().reset();
  o.agg = aggregation::seq_mean_token_mean;
  r = gspo_loss(b, o);
  EXPECT_NEAR(scalar(r.loss), -0.14758129098202022, 1e-12);
  expect_values(grad_of(b, r), {0, 0, 0, s1 / 6, s1 / 6, s1 / 6});
}

TEST(Losses, KlEntropyAndDistillTerms) {
  // A = 0 so the pg term is 0; logp = old = {-1, -2, masked}, ref = {-1.5, -1, NaN}.
  auto make = [] {
    auto b = ratio_batch({1, 1, 1}, {0, 0, 0}, {1, 1, 0}, {0, 0, 0}, 1);
    b.logprobs = D({-1, -2, 0}).requires_grad_();
    b.old_logprobs = D({-1, -2, 0});
    b.ref_logprobs = D({-1.5, -1, nan_v});
    return b;
  };
  // k3: 0.5 * (0.10653065971263342 + 0.7182818284590451)/2; d k3/dlogp = 1 - exp(ref - logp):
  // {1 - exp(-0.5), 1 - e} * 0.5/2 = {0.09836733507184164, -0.4295704571147613}.
  auto b = make();
  policy_loss_options o;
  o.kl = kl_estimator::k3;
  o.kl_coef = 0.5;
  auto r = ppo_loss(b, o);
  EXPECT_NEAR(scalar(r.loss), 0.5 * 0.41240624408583937, 1e-12);
  EXPECT_NEAR(r.metrics.at("kl_loss"), 0.41240624408583937, 1e-12);
  expect_values(grad_of(b, r), {0.09836733507184164, -0.4295704571147613, 0});
  b = make();
  o.kl = kl_estimator::k1;  // 0.5 * (0.5 - 1)/2
  EXPECT_NEAR(scalar(ppo_loss(b, o).loss), -0.125, 1e-12);
  o.kl = kl_estimator::k2;  // 0.5 * (0.125 + 0.5)/2
  EXPECT_NEAR(scalar(ppo_loss(b, o).loss), 0.15625, 1e-12);

  // Entropy {1, 3, NaN*} with coef 0.1: loss = -0.1 * 4/2 = -0.2; d/dentropy = -0.05.
  b = make();
  b.entropy = D({1, 3, nan_v}).requires_grad_();
  policy_loss_options oe;
  oe.entropy_coef = 0.1;
  r = ppo_loss(b, oe);
  EXPECT_NEAR(scalar(r.loss), -0.2, 1e-12);
  EXPECT_NEAR(r.metrics.at("entropy"), 2, 1e-12);
  r.loss.backward();
  expect_values(b.entropy.grad(), {-0.05, -0.05, 0});

  // Distill, coef 1, teacher = {-1.5, -1, NaN}: mean(sg(logp - t) * logp) = (0.5*-1 + -1*-2)/2 =
  // 0.75; grad (logp - t)/2 = {0.25, -0.5}; metrics: mean(logp - t) = -0.25, the gap its negative.
  b = make();
  b.teacher_logprobs = b.ref_logprobs;
  b.ref_logprobs = at::Tensor();  // the teacher's field alone: no reference needed
  policy_loss_options od;
  od.distill_coef = 1;
  r = ppo_loss(b, od);
  EXPECT_NEAR(scalar(r.loss), 0.75, 1e-12);
  EXPECT_NEAR(r.metrics.at("distill_kl_mean"), -0.25, 1e-12);
  EXPECT_NEAR(r.metrics.at("distill_logprob_gap"), 0.25, 1e-12);
  expect_values(grad_of(b, r), {0.25, -0.5, 0});
  // k3 toward the teacher: the KL term's numbers above, coefficient 1.
  b = make();
  b.teacher_logprobs = b.ref_logprobs;
  b.ref_logprobs = at::Tensor();
  od.distill_kl = kl_estimator::k3;
  r = ppo_loss(b, od);
  EXPECT_NEAR(scalar(r.loss), 0.41240624408583937, 1e-12);
  EXPECT_NEAR(r.metrics.at("distill_kl_mean"), 0.41240624408583937, 1e-12);
  expect_values(grad_of(b, r), {2 * 0.09836733507184164, 2 * -0.4295704571147613, 0});

  b = make();
  b.ref_logprobs = at::Tensor();
  EXPECT_THROW(ppo_loss(b, o), c10::Error);
  EXPECT_THROW(ppo_loss(b, od), c10::Error);  // no teacher log-probs
  b = make();
  EXPECT_THROW(ppo_loss(b, od), c10::Error);  // the reference's are not the teacher's
  EXPECT_THROW(ppo_loss(b, oe), c10::Error);  // entropy missing
}

TEST(Losses, TisWeightsAndMisMasks) {
  // TIS, [0.5, 2]: exp(old - rollout) = {3, 0.25, 1.5} -> w = {2, 0.5, 1.5}; A = 1, ratio 1:
  // pg = -w, mean -4/3; tis_mean 4/3; 2 of 3 clamped; grad -w/3.
  auto b = ratio_batch({1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 0}, {0, 0, 1, 1}, 2);
  b.rollout_logprobs = D({-1 - std::log(3.0), -1 - std::log(0.25), -1 - std::log(1.5), nan_v});
  policy_loss_options o;
  o.tis = true;
  o.tis_low = 0.5;
  auto r = ppo_loss(b, o);
  EXPECT_NEAR(scalar(r.loss), -4. / 3, 1e-12);
  EXPECT_NEAR(r.metrics.at("tis_mean"), 4. / 3, 1e-12);
  EXPECT_NEAR(r.metrics.at("tis_clipfrac"), 2. / 3, 1e-12);
  expect_values(grad_of(b, r), {-2. / 3, -0.5 / 3, -0.5, 0});
  b.rollout_logprobs = at::Tensor();
  EXPECT_THROW(ppo_loss(b, o), c10::Error);

  // MIS token, [0.5, 2]: ratios {3, 0.25, 1.5, 1}, A = {1, 1, 1, 2}: tokens 0, 1 dropped, pg =
  // {0, 0, -1, -2}, mean over 4 = -0.75.
  b = ratio_batch({1, 1, 1, 1}, {1, 1, 1, 2}, {1, 1, 1, 1}, {0, 0, 1, 1}, 2);
  b.rollout_logprobs = D({-1 - std::log(3.0), -1 - std::log(0.25), -1 - std::log(1.5), -1});
  policy_loss_options om;
  om.mis = mis_level::token;
  r = ppo_loss(b, om);
  EXPECT_NEAR(scalar(r.loss), -0.75, 1e-12);
  EXPECT_NEAR(r.metrics.at("mis_masked_frac"), 0.5, 1e-12);
  expect_values(grad_of(b, r), {0, 0, -0.25, -0.5});

  // MIS sequence: seq 0 {1.5, 1.5} -> 2.25 > 2: dropped; seq 1 {3, 0.5} -> 1.5 kept; seq 2 {0.8,
  // 100 masked} -> 0.8 kept (the masked token does not count). A = 1: pg = {0, 0, -1, -1, -1}, /5.
  b = ratio_batch({1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 0}, {0, 0, 1, 1, 2, 2},
                  3);
  std::vector<double> roll;
  for (double w : {1.5, 1.5, 3.0, 0.5, 0.8, 100.0}) roll.push_back(-1 - std::log(w));
  b.rollout_logprobs = D(roll);
  om.mis = mis_level::sequence;
  r = ppo_loss(b, om);
  EXPECT_NEAR(scalar(r.loss), -0.6, 1e-12);
  EXPECT_NEAR(r.metrics.at("mis_masked_frac"), 0.4, 1e-12);
  expect_values(grad_of(b, r), {0, 0, -0.2, -0.2, -0.2, 0});
}

TEST(Losses, SftAndValueLoss) {
  // -(-1 - 2)/4 = 0.75 with the step's 4 tokens; local count 2: 1.5.
  auto lp = D({-1, -2, nan_v}).requires_grad_();
  auto l = sft_loss(lp, D({1, 1, 0}), 4);
  EXPECT_NEAR(scalar(l), 0.75, 1e-12);
  l.backward();
  expect_values(lp.grad(), {-0.25, -0.25, 0});
  EXPECT_NEAR(scalar(sft_loss(lp, D({1, 1, 0}), 0)), 1.5, 1e-12);

  // V = {1, 2, 0.5, *}, V_old = {0.5, 1, 0.5, *}, R = {1.5, 0, 2, *}, clip 0.2:
  // t0: (V-R)^2 = 0.25, clipped V = 0.5 + 0.2 = 0.7, (0.7-1.5)^2 = 0.64 -> 0.64 (no gradient).
  // t1: 4 vs (1.2 - 0)^2 = 1.44 -> 4 (gradient (V-R) = 2). t2: 2.25 both (gradient -1.5).
  // 0.5 * (0.64 + 4 + 2.25)/3 = 1.1483333...; unclipped 0.5 * 6.5/3.
  auto v = D({1, 2, 0.5, nan_v}).requires_grad_();
  const auto v_old = D({0.5, 1, 0.5, nan_v}), ret = D({1.5, 0, 2, nan_v}), m = D({1, 1, 1, 0});
  l = value_loss(v, v_old, ret, m, 0.2, 0);
  EXPECT_NEAR(scalar(l), 0.5 * 6.89 / 3, 1e-12);
  l.backward();
  expect_values(v.grad(), {0, 2. / 3, -0.5, 0});
  v.mutable_grad().reset();
  l = value_loss(v, v_old, ret, m, 0, 6);
  EXPECT_NEAR(scalar(l), 0.5 * 6.5 / 6, 1e-12);
  l.backward();
  expect_values(v.grad(), {-0.5 / 6, 2. / 6, -1.5 / 6, 0});
}

TEST(Losses, Float32InputsComputeInFloat32) {
  auto b = ratio_batch({1.5, 0.5}, {1, -1}, {1, 1}, {0, 1}, 2);
  b.logprobs = b.logprobs.detach().to(at::kFloat).requires_grad_();
  b.old_logprobs = b.old_logprobs.to(at::kFloat);
  auto r = ppo_loss(b, {});
  EXPECT_EQ(r.loss.scalar_type(), at::kFloat);
  EXPECT_NEAR(scalar(r.loss), (-1.2 + 0.8) / 2, 1e-6);
}

/// Central differences of the loss in fp64 against autograd, every term on at once.
void check_gradient(const std::string& name) {
  const bool token_level = name == "ppo";
  at::manual_seed(token_level ? 1 : 2);
  const int64_t n = 12;
  const std::vector<int64_t> seq = {0, 0, 0, 0, 1, 1, 1, 2, 3, 3, 3, 3};
  auto seq_t = I(seq);
  policy_batch b;
  b.logprobs = (-1 + 0.5 * at::randn({n}, at::kDouble)).requires_grad_();
  b.old_logprobs = b.logprobs.detach() + 0.15 * at::randn({n}, at::kDouble);
  b.rollout_logprobs = b.old_logprobs + 0.3 * at::randn({n}, at::kDouble);
  b.ref_logprobs = b.logprobs.detach() + 0.5 * at::randn({n}, at::kDouble);
  b.entropy = at::rand({n}, at::kDouble);
  b.mask = D({1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1});
  b.seq_index = seq_t;
  b.num_seqs = 4;
  b.global_tokens = 20;
  b.global_seqs = 6;
  policy_loss_options o;
  o.eps_clip = 0.1;
  o.eps_clip_high = 0.15;
  o.kl = kl_estimator::k3;
  o.kl_coef = 0.3;
  o.entropy_coef = 0.01;
  if (token_level) {
    // Per-token advantages, TIS weights and a dual clip; the distill term is left out (its
    // stop-gradient makes its gradient differ from the derivative of its value by design).
    b.advantages = at::randn({n}, at::kDouble);
    o.dual_clip_c = 1.5;
    o.tis = true;
    o.tis_low = 0.8;
    o.tis_high = 1.2;
    o.agg = aggregation::seq_mean_token_mean;
  } else {
    // GSPO's gradient equals the derivative of its value when every token of a sequence carries
    // the same advantage and weight.
    b.advantages = D({1, 2, -0.5, -1.5}).index_select(0, seq_t);
    o.agg = aggregation::token_mean;
  }
  auto r = loss_named(name, b, o);
  r.loss.backward();
  const auto grad = b.logprobs.grad().clone();
  const double h = 1e-6;
  for (int64_t i = 0; i < n; ++i) {
    policy_batch p = b;
    p.logprobs = b.logprobs.detach().clone();
    p.logprobs[i] += h;
    const double up = scalar(loss_named(name, p, o).loss);
    p.logprobs[i] -= 2 * h;
    const double down = scalar(loss_named(name, p, o).loss);
    EXPECT_NEAR(grad[i].item<double>(), (up - down) / (2 * h), 1e-7) << "token " << i;
  }
  EXPECT_GT(grad.abs().sum().item<double>(), 0.01);
}

TEST(Losses, GradientMatchesFiniteDifferencesTokenLevel) { check_gradient("ppo"); }
TEST(Losses, GradientMatchesFiniteDifferencesSequenceLevel) { check_gradient("gspo"); }

}  // namespace
}  // namespace milesrt::rl
