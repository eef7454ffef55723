// The same model code on CUDA in bf16 (SDPA attention per sequence), against the CPU in fp32.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "actors/lib/llm/bf16_testing.hpp"

namespace milesrt::llm {
namespace {

using testing::bf16_max_diff;
using testing::bf16_sequences;
using testing::kBf16Config;

TEST(ModelCuda, Bf16IsCloseToCpuFp32AndItsPathsAgree) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  auto cpu = decoder::random(kBf16Config, at::kFloat, at::kCPU, 5);
  auto gpu = decoder::random(kBf16Config, at::kBFloat16, at::Device(at::kCUDA, 0), 5);
  auto seqs = bf16_sequences();
  auto on_gpu = gpu->score_sequences(seqs, 1.0);
  auto d = bf16_max_diff(cpu->score_sequences(seqs, 1.0), on_gpu);
  EXPECT_LT(d, 0.1);
  std::cout << "cuda bf16 vs cpu fp32: max |diff| = " << d << "\n";
  // Prefill then decode through a paged cache on the GPU.
  auto cache = gpu->make_cache(64, 16);
  const auto& s = seqs[2];
  std::vector<int32_t> table;
  for (int32_t b = 0; b < 13; ++b) table.push_back(b);
  std::vector<int64_t> prompt(s.begin(), s.begin() + 100);
  auto fr = gpu->forward({{prompt, 0, &table}}, {&cache, nullptr});
  std::vector<float> served;
  auto last = fr.hidden.narrow(0, 99, 1);
  for (size_t p = 100; p < s.size(); ++p) {
    served.push_back(gpu->score_rows(last, at::tensor({s[p]}, at::kLong), 1.0).logprobs.item<float>());
    auto step = gpu->forward({{{s[p]}, int64_t(p), &table}}, {&cache, nullptr});
    last = step.hidden;
  }
  auto packed = on_gpu[2].logprobs.to(at::kCPU);
  double worst = 0;
  for (size_t i = 0; i < served.size(); ++i) worst = std::max(worst, std::abs(double(served[i]) - packed[99 + i].item<double>()));
  EXPECT_LT(worst, 0.1);
  std::cout << "cuda bf16 packed vs paged decode: max |diff| = " << worst << "\n";
}

}  // namespace
}  // namespace milesrt::llm
