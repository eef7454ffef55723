// Multi-turn trajectories train with masks: the tokens an environment supplied (a tool's answer)
// are context, so neither the loss nor the gradient sees them (train_sequence::mask).
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include <cstring>

#include "actors/lib/llm/tiny_model_testing.hpp"
#include "actors/trainer/batch_layout.hpp"
#include "actors/trainer/trainer_core.hpp"

namespace milesrt::trainer {
namespace {

train_sequence masked_seq(std::vector<int64_t> output, std::vector<uint8_t> mask, float reward) {
  train_sequence s;
  s.prompt = {3, 9, 4, 1};
  s.output = std::move(output);
  s.mask = std::move(mask);
  s.rollout_logprobs.assign(s.output.size(), -3.0f);
  s.reward = reward;
  return s;
}

/// log p of each output token of `s` under `m`.
std::vector<double> token_logprobs(const llm::decoder& m, const train_sequence& s) {
  at::NoGradGuard no_grad;
  auto full = s.prompt;
  full.insert(full.end(), s.output.begin(), s.output.end());
  auto sc = m.score_sequences({full}, 1.0);
  const int64_t n = static_cast<int64_t>(s.output.size());
  auto lp = sc[0].logprobs.narrow(0, sc[0].logprobs.numel() - n, n);
  std::vector<double> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(lp[i].item<double>());
  return out;
}

TEST(MaskedLoss, TheLayoutKeepsOnlySampledTokens) {
  auto l = lay_out({masked_seq({5, 6, 7}, {1, 0, 1}, 1), masked_seq({8, 2}, {}, 0)}, false, 64);
  EXPECT_EQ(l.num_tokens, 5);
  EXPECT_EQ(l.trained_tokens, 4);
  auto m = l.mask.contiguous();
  std::vector<float> got(m.data_ptr<float>(), m.data_ptr<float>() + m.numel());
  EXPECT_EQ(got, (std::vector<float>{1, 0, 1, 1, 1}));
  EXPECT_THROW(lay_out({masked_seq({5, 6}, {1}, 0)}, false, 64), std::invalid_argument);
}

TEST(MaskedLoss, TheSftLossIsTheMeanOverTheSampledTokensByHand) {
  // Turn 1 sampled (3 tokens), a tool's answer (2 tokens, context), turn 2 sampled (2 tokens).
  auto s = masked_seq({5, 6, 7, 20, 21, 8, 2}, {1, 1, 1, 0, 0, 1, 1}, 0);
  auto model = llm::testing::tiny_model(5, llm::testing::kTinyQwen3);
  const auto lp = token_logprobs(*model, s);
  double kept = 0, n = 0;
  for (size_t i = 0; i < lp.size(); ++i) {
    if (!s.mask[i]) continue;
    kept += lp[i];
    n += 1;
  }
  trainer_options o;
  o.objective = "sft";
  policy_trainer t(std::move(model), o);
  auto m = t.train({s});
  EXPECT_NEAR(m.at("sft_loss"), -kept / n, 1e-5);
}

bool bitwise_equal(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

TEST(MaskedLoss, AnEnvironmentsTokensReachNoGradient) {
  // Two GRPO groups' worth of one group: the trajectories differ only in their last two tokens,
  // the environment's. Masked, the step is the same to the bit; trained on, it is not.
  auto step = [](bool masked, int64_t tool_token) {
    std::vector<uint8_t> mask =
        masked ? std::vector<uint8_t>{1, 1, 1, 0, 0} : std::vector<uint8_t>{};
    trainer_options o;
    o.optimizer.lr = 1e-2;
    policy_trainer t(llm::testing::tiny_model(5, llm::testing::kTinyQwen3), o);
    t.train({masked_seq({5, 6, 7, tool_token, 11}, mask, 1),
             masked_seq({9, 6, 2, tool_token, 12}, mask, 0)});
    return t.model().params().buffer().detach().clone();
  };
  EXPECT_TRUE(bitwise_equal(step(true, 20), step(true, 25)));
  EXPECT_FALSE(bitwise_equal(step(false, 20), step(false, 25)));
}

}  // namespace
}  // namespace milesrt::trainer
