// The training path on CUDA against the CPU reference: the chunked log-prob/entropy autograd
// function (fp32, tight; bf16, loose), the whole packed forward + backward in bf16 (variable-length
// flash attention, per-parameter gradients in the flat buffer) against the same weights in fp32 on
// the CPU.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include <limits>

#include "actors/lib/llm/bf16_testing.hpp"

namespace milesrt::llm {
namespace {

const at::Device kCuda(at::kCUDA, 0);

/// Relative L2 distance of two tensors (compared on the CPU in fp64).
double rel_diff(const at::Tensor& a, const at::Tensor& b) {
  auto x = a.to(at::kCPU, at::kDouble), y = b.to(at::kCPU, at::kDouble);
  return (x - y).norm().item<double>() / std::max(1e-30, y.norm().item<double>());
}

TEST(TrainCuda, ChunkedScoresFunctionMatchesCpuAutogradOverSeveralChunks) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  // 100,000 words: the GPU chunks are 2^28 / 100,000 = 2,684 rows, so 4,000 rows take two.
  const int64_t n = 4000, d = 32, vocab = 100000;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  auto hidden = at::randn({n, d}, gen, at::kDouble).to(at::kFloat);
  auto head = (at::randn({vocab, d}, gen, at::kDouble) * 0.3).to(at::kFloat);
  auto targets = at::randint(vocab, {n}, gen, at::kLong);
  auto w_lp = at::randn({n}, gen, at::kDouble).to(at::kFloat);
  auto w_ent = at::randn({n}, gen, at::kDouble).to(at::kFloat);
  auto run = [&](at::Device dev) {
    auto h = hidden.to(dev).clone().requires_grad_(true),
         w = head.to(dev).clone().requires_grad_(true);
    auto s = chunked_scores(h, w, targets.to(dev), 0.7, 256);
    ((s.logprobs * w_lp.to(dev)).sum() + (s.entropy * w_ent.to(dev)).sum()).backward();
    return std::vector<at::Tensor>{s.logprobs.detach(), s.entropy.detach(), h.grad(), w.grad()};
  };
  auto cpu = run(at::kCPU), gpu = run(kCuda);
  const char* what[] = {"log-probs", "entropies", "hidden gradient", "head gradient"};
  for (int i = 0; i < 4; ++i) {
    const double r = rel_diff(gpu[i], cpu[i]);
    std::cout << what[i] << ": relative difference " << r << "\n";
    EXPECT_LT(r, 1e-4) << what[i];
  }
}

TEST(TrainCuda, PackedBackwardInBf16FollowsTheCpuFp32Gradient) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  // head_dim 32 and 4 query / 2 kv heads: flash attention's grouped-query path.
  auto cpu = decoder::random(testing::kBf16Config, at::kFloat, at::kCPU, 5);
  auto gpu = decoder::random(testing::kBf16Config, at::kBFloat16, kCuda, 5);
  {  // the same weights: the CPU model takes the bf16 values
    at::NoGradGuard no_grad;
    cpu->mutable_params().buffer().copy_(gpu->params().buffer().to(at::kCPU, at::kFloat));
  }
  auto seqs = testing::bf16_sequences();  // lengths 5, 40, 200 in one packed batch
  auto backward = [&](decoder& m) {
    m.mutable_params().enable_grad();
    auto scores = m.score_sequences(seqs, 1.0);
    at::Tensor loss;
    for (size_t i = 0; i < scores.size(); ++i) {
      auto part = scores[i].logprobs.sum() * (i + 1.0) - 0.5 * scores[i].entropy.sum();
      loss = loss.defined() ? loss + part : part;
    }
    loss.backward();
    return m.params().grad().to(at::kCPU, at::kFloat);
  };
  auto g_cpu = backward(*cpu), g_gpu = backward(*gpu);
  const double r = rel_diff(g_gpu, g_cpu);
  const double cos = (g_gpu.to(at::kDouble) * g_cpu.to(at::kDouble)).sum().item<double>() /
                     (g_gpu.to(at::kDouble).norm() * g_cpu.to(at::kDouble).norm()).item<double>();
  std::cout << "flat gradient, cuda bf16 vs cpu fp32: relative difference " << r << ", cosine "
            << cos << "\n";
  EXPECT_LT(r, 0.05);
  EXPECT_GT(cos, 0.998);
  // Every parameter received a gradient (the flat buffer has no untouched parameter).
  for (const auto& [name, count] : gpu->params().element_counts()) {
    EXPECT_GT(gpu->params().get(name).grad().abs().sum().item<double>(), 0) << name;
  }
  // A second backward adds to the gradients (the kernels that write into a parameter's gradient
  // accumulate, as autograd does): twice the first, within bf16 rounding.
  auto g_twice = backward(*gpu);
  const double r2 = rel_diff(g_twice, 2 * g_gpu);
  std::cout << "two backwards vs twice one: relative difference " << r2 << "\n";
  EXPECT_LT(r2, 1e-2);
}

// bf16 on CUDA (the sampler's reduction and the in-place logits gradient) against CPU autograd in
// fp32 over the same bf16 values; the head's gradient is added into the gradient it has, twice.
TEST(TrainCuda, Bf16ScoresFollowCpuAutograd) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const int64_t n = 3000, d = 64, vocab = 151936;  // two chunks of 1,766 rows
  auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
  auto hidden = at::randn({n, d}, gen, at::kDouble).to(at::kBFloat16);
  auto head = (at::randn({vocab, d}, gen, at::kDouble) * 0.3).to(at::kBFloat16);
  auto targets = at::randint(vocab, {n}, gen, at::kLong);
  auto w_lp = at::randn({n}, gen, at::kDouble).to(at::kFloat);
  auto w_ent = at::randn({n}, gen, at::kDouble).to(at::kFloat);
  auto run = [&](at::Device dev, at::ScalarType type) {
    auto h = hidden.to(dev, type).requires_grad_(true), w = head.to(dev, type).requires_grad_(true);
    w.mutable_grad() = at::zeros_like(w);  // a parameter's gradient buffer: added into
    token_scores s;
    for (int pass = 0; pass < 2; ++pass) {  // two micro-batches: the gradients add up
      s = chunked_scores(h, w, targets.to(dev), 0.7, 256);
      ((s.logprobs * w_lp.to(dev)).sum() + (s.entropy * w_ent.to(dev)).sum()).backward();
    }
    return std::vector<at::Tensor>{s.logprobs.detach(), s.entropy.detach(), h.grad(), w.grad()};
  };
  auto cpu = run(at::kCPU, at::kFloat), gpu = run(kCuda, at::kBFloat16);
  const char* what[] = {"log-probs", "entropies", "hidden gradient", "head gradient"};
  const double limit[] = {1e-2, 1e-2, 2e-2, 5e-2};  // bf16 logits and gradients
  for (int i = 0; i < 4; ++i) {
    const double r = rel_diff(gpu[i], cpu[i]);
    std::cout << what[i] << ": relative difference " << r << "\n";
    EXPECT_LT(r, limit[i]) << what[i];
  }
}

}  // namespace
}  // namespace milesrt::llm
