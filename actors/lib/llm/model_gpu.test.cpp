// The same model code on CUDA in bf16 (SDPA attention per sequence), against the CPU in fp32.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

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
    served.push_back(
        gpu->score_rows(last, at::tensor({s[p]}, at::kLong), 1.0).logprobs.item<float>());
    auto step = gpu->forward({{{s[p]}, int64_t(p), &table}}, {&cache, nullptr});
    last = step.hidden;
  }
  auto packed = on_gpu[2].logprobs.to(at::kCPU);
  double worst = 0;
  for (size_t i = 0; i < served.size(); ++i)
    worst = std::max(worst, std::abs(double(served[i]) - packed[99 + i].item<double>()));
  EXPECT_LT(worst, 0.1);
  std::cout << "cuda bf16 packed vs paged decode: max |diff| = " << worst << "\n";
}

// The paged attention kernels (head_dim 128): one batch mixing a whole prompt, a chunk over a
// cached prefix and decode rows, over scattered block tables, gives the packed forward's hidden
// states (fp32 weights of the same bf16 values: the bound is bf16 rounding).
TEST(ModelCuda, PagedKernelsAgreeWithThePackedForwardOnMixedBatches) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const char* cfg = R"({"model_type": "qwen3", "vocab_size": 512, "hidden_size": 256,
    "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 128, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
    "tie_word_embeddings": true, "hidden_act": "silu"})";
  const at::Device cuda(at::kCUDA, 0);
  auto gpu = decoder::random(cfg, at::kBFloat16, cuda, 3);
  auto cache = gpu->make_cache(64, 16);
  ASSERT_TRUE(cache.paged_kernels());
  auto seqs = bf16_sequences();  // lengths 5, 40, 200
  // Block tables handed out from the top of the pool down, interleaved between sequences.
  std::vector<std::vector<int32_t>> tables(3);
  int32_t next = 63;
  for (int round = 0; round < 13; ++round)
    for (auto& t : tables) t.push_back(next--);
  // Step 1: sequence 0 whole, sequence 1's first 30 tokens, sequence 2's first 150.
  std::vector<segment> step1 = {{seqs[0], 0, &tables[0]},
                                {{seqs[1].begin(), seqs[1].begin() + 30}, 0, &tables[1]},
                                {{seqs[2].begin(), seqs[2].begin() + 150}, 0, &tables[2]}};
  auto h1 = gpu->forward(step1, {&cache, nullptr}).hidden;
  // Step 2: sequence 1's other 10 (a chunk over its cached prefix), sequence 2's token 150 (a
  // decode row); sequence 0 sits out.
  std::vector<segment> step2 = {{{seqs[1].begin() + 30, seqs[1].end()}, 30, &tables[1]},
                                {{seqs[2][150]}, 150, &tables[2]}};
  auto h2 = gpu->forward(step2, {&cache, nullptr}).hidden;
  // Step 3: decode rows only (the decode kernel): sequence 2's token 151 and a new token (id 7)
  // after sequence 0.
  std::vector<segment> step3 = {{{seqs[2][151]}, 151, &tables[2]}, {{7}, 5, &tables[0]}};
  auto h3 = gpu->forward(step3, {&cache, nullptr}).hidden;

  auto packed = [&](const std::vector<int64_t>& s) {
    return gpu->forward({{s, 0, nullptr}}, {}).hidden;
  };
  auto s0 = seqs[0];
  s0.push_back(7);
  auto p0 = packed(s0), p1 = packed(seqs[1]),
       p2 = packed(std::vector<int64_t>(seqs[2].begin(), seqs[2].begin() + 152));
  auto diff = [](const at::Tensor& a, const at::Tensor& b) {
    return (a.to(at::kFloat) - b.to(at::kFloat)).abs().max().item<double>();
  };
  double worst = 0;
  worst = std::max(worst, diff(h1.narrow(0, 0, 5), p0.narrow(0, 0, 5)));
  worst = std::max(worst, diff(h1.narrow(0, 5, 30), p1.narrow(0, 0, 30)));
  worst = std::max(worst, diff(h1.narrow(0, 35, 150), p2.narrow(0, 0, 150)));
  worst = std::max(worst, diff(h2.narrow(0, 0, 10), p1.narrow(0, 30, 10)));
  worst = std::max(worst, diff(h2.narrow(0, 10, 1), p2.narrow(0, 150, 1)));
  worst = std::max(worst, diff(h3.narrow(0, 0, 1), p2.narrow(0, 151, 1)));
  worst = std::max(worst, diff(h3.narrow(0, 1, 1), p0.narrow(0, 5, 1)));
  std::cout << "paged kernels vs packed forward: max |hidden diff| = " << worst << "\n";
  // Hidden states are RMS-normalised (entries up to ~4, where a bf16 step is 0.03): two attention
  // kernels' rounding stays below 0.25; a wrong page, position or mask changes them by O(1).
  EXPECT_LT(worst, 0.25);
}

// MoE on the device: without autograd the experts run as two grouped GEMMs with no host
// synchronisation; the result matches the per-expert path (autograd on) and CPU fp32 within bf16
// rounding, and the routing recorded is the router's top-k.
TEST(ModelCuda, GroupedExpertsMatchThePerExpertPath) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const char* cfg = R"({"model_type": "qwen3_moe", "vocab_size": 512, "hidden_size": 256,
    "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 128, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
    "tie_word_embeddings": false, "hidden_act": "silu", "num_experts": 8, "num_experts_per_tok": 2,
    "moe_intermediate_size": 128, "norm_topk_prob": true, "decoder_sparse_step": 1, "mlp_only_layers": []})";
  auto gpu = decoder::random(cfg, at::kBFloat16, at::Device(at::kCUDA, 0), 4);
  auto cpu = decoder::random(cfg, at::kFloat, at::kCPU, 4);
  cpu->set_params(gpu->params().copy(at::kFloat, at::kCPU));
  auto seqs = bf16_sequences();
  std::vector<token_scores> grouped, per_expert;
  forward_result routed;
  {
    at::NoGradGuard no_grad;
    grouped = gpu->score_sequences(seqs, 1.0, 256, &routed);
  }
  per_expert = gpu->score_sequences(seqs, 1.0);  // autograd on: the per-expert path
  const double d_path = bf16_max_diff(grouped, per_expert);
  const double d_cpu = bf16_max_diff(grouped, cpu->score_sequences(seqs, 1.0));
  std::cout << "MoE grouped vs per-expert: " << d_path << ", vs cpu fp32: " << d_cpu << "\n";
  EXPECT_LT(d_path, 0.1);
  // Against fp32 a router's near-tie can pick another expert in bf16: looser than the dense 0.1.
  EXPECT_LT(d_cpu, 0.25);
  ASSERT_EQ(routed.experts.size(), 2u);
  EXPECT_EQ(routed.experts[0].size(1), 2);
  EXPECT_TRUE(at::equal(routed.experts[0].to(at::kCPU),
                        std::get<1>(at::topk(routed.router_probs[0], 2, -1)).to(at::kCPU)));
}

}  // namespace
}  // namespace milesrt::llm
