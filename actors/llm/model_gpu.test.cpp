// The same model code on CUDA in bf16 (SDPA attention per sequence), against the CPU in fp32.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "actors/llm/model.hpp"

namespace milesrt::llm {
namespace {

const char* kConfig = R"({"model_type": "qwen3", "vocab_size": 512, "hidden_size": 128,
  "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
  "num_key_value_heads": 2, "head_dim": 32, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
  "tie_word_embeddings": true, "hidden_act": "silu"})";

std::vector<std::vector<int64_t>> sequences() {
  std::vector<std::vector<int64_t>> seqs;
  for (int len : {5, 40, 200}) {
    std::vector<int64_t> s;
    for (int i = 0; i < len; ++i) s.push_back((i * 37 + len) % 512);
    seqs.push_back(s);
  }
  return seqs;
}

double max_diff(const std::vector<token_scores>& a, const std::vector<token_scores>& b) {
  double worst = 0;
  for (size_t s = 0; s < a.size(); ++s) {
    worst = std::max(worst, (a[s].logprobs.to(at::kCPU) - b[s].logprobs.to(at::kCPU)).abs().max().item<double>());
  }
  return worst;
}

TEST(ModelCuda, Bf16IsCloseToCpuFp32AndItsPathsAgree) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  auto cpu = decoder::random(kConfig, at::kFloat, at::kCPU, 5);
  auto gpu = decoder::random(kConfig, at::kBFloat16, at::Device(at::kCUDA, 0), 5);
  auto seqs = sequences();
  auto on_gpu = gpu->score_sequences(seqs, 1.0);
  auto d = max_diff(cpu->score_sequences(seqs, 1.0), on_gpu);
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
