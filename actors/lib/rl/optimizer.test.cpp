#include "actors/lib/rl/optimizer.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace milesrt::rl {
namespace {

at::Tensor F(const std::vector<float>& v) { return at::tensor(v, at::kFloat); }

void expect_values(const at::Tensor& t, const std::vector<double>& want, double tol) {
  auto c = t.detach().to(at::kCPU, at::kDouble).contiguous();
  ASSERT_EQ(c.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(c.data_ptr<double>()[i], want[i], tol) << "element " << i;
}

adamw_options plain(double lr) {
  adamw_options o;
  o.lr = lr;
  o.grad_clip = 0;
  return o;
}

TEST(AdamW, ConstantGradientMovesByLrPerStep) {
  // With a constant g, m_t = (1 - 0.9^t) g and v_t = (1 - 0.999^t) g^2, so the bias-corrected
  // update is lr * g / (|g| + eps) every step: p0 = {1, 2}, g = {1, -2}, lr 0.1:
  // p3 = {1 - 3*0.1/(1 + 1e-8), 2 + 3*0.1*2/(2 + 1e-8)} = {0.700000003, 2.2999999985}.
  // m3 = 0.271 g, v3 = 0.002997001 g^2.
  auto p = F({1, 2});
  adamw opt(plain(0.1), p);
  for (int i = 0; i < 3; ++i) {
    auto info = opt.step(p, F({1, -2}));
    EXPECT_FALSE(info.skipped);
    EXPECT_NEAR(info.grad_norm, std::sqrt(5.0), 1e-6);
    EXPECT_EQ(info.lr, 0.1);
  }
  EXPECT_EQ(opt.steps(), 3u);
  expect_values(p, {0.700000003, 2.2999999985}, 1e-6);
  expect_values(opt.exp_avg(), {0.271, -0.542}, 1e-7);
  expect_values(opt.exp_avg_sq(), {0.002997001, 0.011988004}, 1e-9);
}

TEST(AdamW, ThreeStepsWithWeightDecayMatchHandAndTorch) {
  // lr 0.01, wd 0.1, p0 = {1, -1}, g = {0.5, 1}, {-1, 0.5}, {0.2, -0.4}. Per step:
  // p *= 1 - 0.001; m = 0.9 m + 0.1 g; v = 0.999 v + 0.001 g^2;
  // p -= 0.01 * (m / (1 - 0.9^t)) / (sqrt(v / (1 - 0.999^t)) + 1e-8).
  // t=1: m = {0.05, 0.1}, v = {0.00025, 0.001}, p = {0.999 - 0.01, -0.999 - 0.01} (up to eps)
  //      = {0.9890000002, -1.0089999999}.
  // t=2: m = {-0.055, 0.14}, v = {0.00124975, 0.001249}, bias corrections 0.19, 0.001999:
  //      p = {0.9916720354238566, -1.0173127961702841}.
  // t=3: m = {-0.0295, 0.086}, v = {0.00128850025, 0.001407751}, bias corrections 0.271,
  //      0.002997001: p = {0.9923405385380873, -1.020925789190744}.
  adamw_options o = plain(0.01);
  o.weight_decay = 0.1;
  auto p = F({1, -1});
  adamw opt(o, p);
  const std::vector<std::vector<float>> grads = {{0.5f, 1}, {-1, 0.5f}, {0.2f, -0.4f}};
  const std::vector<std::vector<double>> want = {{0.9890000002, -1.0089999999},
                                                 {0.9916720354238566, -1.0173127961702841},
                                                 {0.9923405385380873, -1.020925789190744}};
  // torch.optim.AdamW(foreach=False) in fp32, torch 2.11 on the CPU, after each step:
  const std::vector<std::vector<float>> torch_fp32 = {{0x1.fa5e36p-1f, -0x1.024dd4p+0f},
                                                      {0x1.fbbc72p-1f, -0x1.046e9ep+0f},
                                                      {0x1.fc1412p-1f, -0x1.055b66p+0f}};
  for (size_t t = 0; t < 3; ++t) {
    opt.step(p, F(grads[t]));
    expect_values(p, want[t], 2e-7);
    expect_values(p, {torch_fp32[t][0], torch_fp32[t][1]}, 1e-7);  // bitwise equal where written
  }
  expect_values(opt.exp_avg(), {-0.0295, 0.086}, 1e-8);  // fp32 rounding: ~1e-7 relative
  expect_values(opt.exp_avg_sq(), {0.00128850025, 0.001407751}, 1e-9);
}

TEST(AdamW, ClipsByGlobalNormWithoutTouchingTheCallersGradient) {
  // g = {3, 4}: norm 5 > 1, scaled by 1/(5 + 1e-6) to {0.6, 0.8}: m1 = {0.06, 0.08},
  // v1 = {0.00036, 0.00064}; p1 = {1 - 0.1*0.6/(0.6 + 1e-8), -1 - 0.1*0.8/(0.8 + 1e-8)}
  // = {0.9000000016666666, -1.09999999875}.
  // g = {-0.3, 0}: norm 0.3 < 1, not scaled: m2 = {0.024, 0.072}, v2 = {0.00044964, 0.00063936};
  // mhat = m2/0.19, vhat = v2/0.001999: p2 = p1 - 0.1*mhat/(sqrt(vhat) + 1e-8)
  // = {0.8733662982621984, -1.1670058229788511}.
  adamw_options o = plain(0.1);
  o.grad_clip = 1;
  auto p = F({1, -1});
  adamw opt(o, p);
  const auto g = F({3, 4});
  auto info = opt.step(p, g);
  EXPECT_NEAR(info.grad_norm, 5, 1e-6);
  expect_values(g, {3, 4}, 0);
  expect_values(opt.exp_avg(), {0.06, 0.08}, 5e-8);
  expect_values(opt.exp_avg_sq(), {0.00036, 0.00064}, 1e-9);
  expect_values(p, {0.9000000016666666, -1.09999999875}, 1e-7);
  info = opt.step(p, F({-0.3f, 0}));
  EXPECT_NEAR(info.grad_norm, 0.3, 1e-7);
  expect_values(opt.exp_avg(), {0.024, 0.072}, 5e-8);
  expect_values(p, {0.8733662982621984, -1.1670058229788511}, 2e-7);
  // torch: clip_grad_norm_ + AdamW(foreach=False) gives {0.8733662962913513, -1.1670058965682983}.
  expect_values(p, {0.8733662962913513, -1.1670058965682983}, 1e-7);
}

TEST(AdamW, WarmupAndCosineLearningRates) {
  adamw_options o;
  o.lr = 1;
  o.warmup_steps = 4;
  o.schedule = "cosine";
  o.min_lr = 0.1;
  o.total_steps = 12;
  EXPECT_DOUBLE_EQ(lr_at(o, 1), 0.25);  // lr * 1/4
  EXPECT_DOUBLE_EQ(lr_at(o, 2), 0.5);
  EXPECT_DOUBLE_EQ(lr_at(o, 4), 1.0);
  // step 6: progress (6-4)/8 = 0.25: 0.1 + 0.9 * 0.5 * (1 + cos(pi/4)) = 0.1 + 0.45
  // * 1.7071067811865476
  EXPECT_NEAR(lr_at(o, 6), 0.8681980515339464, 1e-15);
  EXPECT_NEAR(lr_at(o, 8), 0.55, 1e-15);  // progress 0.5: 0.1 + 0.45
  EXPECT_NEAR(lr_at(o, 12), 0.1, 1e-15);
  EXPECT_NEAR(lr_at(o, 20), 0.1, 1e-15);
  o.schedule = "constant";
  EXPECT_DOUBLE_EQ(lr_at(o, 3), 0.75);
  EXPECT_DOUBLE_EQ(lr_at(o, 100), 1.0);
  o.schedule = "linear";
  EXPECT_THROW(lr_at(o, 1), std::invalid_argument);
  o.schedule = "cosine";
  o.total_steps = 4;
  EXPECT_THROW(adamw(o, F({1})), std::invalid_argument);

  // The optimizer steps with the schedule's lr: step 1 of a 4-step warmup from lr 0.4 is 0.1.
  adamw_options w = plain(0.4);
  w.warmup_steps = 4;
  auto p = F({1});
  adamw opt(w, p);
  EXPECT_DOUBLE_EQ(opt.step(p, F({1})).lr, 0.1);
  expect_values(p, {0.9}, 1e-7);  // the first step moves by lr exactly (up to eps)
}

TEST(AdamW, NonFiniteGradientIsSkipped) {
  auto p = F({1, 2});
  adamw opt(plain(0.1), p);
  for (float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    auto info = opt.step(p, F({bad, 1}));
    EXPECT_TRUE(info.skipped);
    EXPECT_FALSE(std::isfinite(info.grad_norm));
  }
  EXPECT_EQ(opt.steps(), 0u);
  expect_values(p, {1, 2}, 0);
  expect_values(opt.exp_avg(), {0, 0}, 0);
  expect_values(opt.exp_avg_sq(), {0, 0}, 0);
  EXPECT_FALSE(opt.step(p, F({1, 1})).skipped);
  EXPECT_EQ(opt.steps(), 1u);
  expect_values(p, {0.9, 1.9}, 1e-6);
}

TEST(AdamW, SaveLoadRoundTripIsBitwise) {
  adamw_options o = plain(0.01);
  o.weight_decay = 0.01;
  auto p = at::randn({37}, at::kFloat);
  adamw a(o, p);
  for (int i = 0; i < 2; ++i) a.step(p, at::randn({37}, at::kFloat));
  const auto bytes = a.save();
  auto q = p.clone();
  adamw b(o, q);
  b.load(bytes);
  EXPECT_EQ(b.steps(), 2u);
  EXPECT_TRUE(at::equal(a.exp_avg(), b.exp_avg()));
  EXPECT_TRUE(at::equal(a.exp_avg_sq(), b.exp_avg_sq()));
  EXPECT_EQ(b.save(), bytes);
  const auto g = at::randn({37}, at::kFloat);
  a.step(p, g);
  b.step(q, g);
  EXPECT_TRUE(at::equal(p, q));  // the resumed run continues bitwise

  auto expect_error = [](const std::function<void()>& f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "no error, expected one naming '" << needle << "'";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  auto small = F({1, 2});
  adamw c(o, small);
  expect_error([&] { c.load(bytes); }, "37 elements but the parameters have 2");
  auto truncated = bytes;
  truncated.pop_back();
  expect_error([&] { b.load(truncated); }, "bytes, expected");
  auto bad = bytes;
  bad[0] = 'X';
  expect_error([&] { b.load(bad); }, "magic");
  expect_error([&] { b.load({1, 2, 3}); }, "header");
  EXPECT_TRUE(at::equal(a.exp_avg(), b.exp_avg()));  // failed loads leave the state alone
}

TEST(AdamW, RejectsMismatchedTensors) {
  auto p = F({1, 2});
  adamw opt(plain(0.1), p);
  EXPECT_THROW(opt.step(p, F({1, 2, 3})), c10::Error);
  auto d = p.to(at::kDouble);
  EXPECT_THROW(opt.step(d, F({1, 2})), c10::Error);
  EXPECT_THROW(adamw(plain(0.1), d), c10::Error);
}

}  // namespace
}  // namespace milesrt::rl
