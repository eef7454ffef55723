#pragma once
// Shared by the bf16 tests (CPU in model.test.cpp, CUDA in model_gpu.test.cpp): one small Qwen3
// config, a few sequences, and the largest log-prob difference between two scorings.
#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

#include "actors/lib/llm/model.hpp"

namespace milesrt::llm::testing {

inline const char* kBf16Config = R"({"model_type": "qwen3", "vocab_size": 512, "hidden_size": 128,
  "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
  "num_key_value_heads": 2, "head_dim": 32, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
  "tie_word_embeddings": true, "hidden_act": "silu"})";

inline std::vector<std::vector<int64_t>> bf16_sequences() {
  std::vector<std::vector<int64_t>> seqs;
  for (int len : {5, 40, 200}) {
    std::vector<int64_t> s;
    for (int i = 0; i < len; ++i) s.push_back((i * 37 + len) % 512);
    seqs.push_back(s);
  }
  return seqs;
}

inline double bf16_max_diff(const std::vector<token_scores>& a,
                            const std::vector<token_scores>& b) {
  double worst = 0;
  for (size_t s = 0; s < a.size(); ++s) {
    worst = std::max(
        worst,
        (a[s].logprobs.to(at::kCPU) - b[s].logprobs.to(at::kCPU)).abs().max().item<double>());
  }
  return worst;
}

}  // namespace milesrt::llm::testing
