// The rollout engine on CUDA in bf16: correct (not yet fast). Skipped without a GPU.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "actors/lib/serving/engine.hpp"

namespace milesrt::serving {
namespace {

TEST(EngineCuda, GeneratesGroupsInBf16AndItsLogProbsMatchTheTrainingForward) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  auto model = llm::decoder::random(R"({"model_type": "qwen3", "vocab_size": 512, "hidden_size": 128,
    "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 32, "rope_theta": 1000000.0, "tie_word_embeddings": true, "hidden_act": "silu"})",
                                    at::kBFloat16, at::Device(at::kCUDA, 0), 8);
  engine e(*model, {256, 16, 64, 64});  // a small step budget: chunked prefill on the GPU too
  for (uint64_t r = 0; r < 3; ++r) {
    generate_request q;
    q.id = r;
    for (int i = 0; i < 50 + 30 * int(r); ++i) q.prompt.push_back((i * 17 + r) % 512);
    q.params.n = 4;
    q.params.max_new_tokens = 12;
    q.params.seed = r;
    e.add(q);
  }
  auto out = e.run();
  ASSERT_EQ(out.size(), 12u);
  EXPECT_GT(e.stats().prefix_hit_rate, 0.5);
  double worst = 0;
  for (const auto& s : out) {
    ASSERT_EQ(s.output.size(), 12u);
    std::vector<int64_t> full = s.prompt;
    full.insert(full.end(), s.output.begin(), s.output.end());
    auto scored = model->score_sequences({full}, 1.0)[0].logprobs.to(at::kCPU);
    for (size_t i = 0; i < s.output.size(); ++i) {
      worst = std::max(worst, std::abs(double(s.logprobs[i]) - scored[s.prompt.size() - 1 + i].item<double>()));
    }
  }
  // bf16 on the GPU: close, not bitwise (see the README).
  EXPECT_LT(worst, 0.15);
  std::cout << "cuda bf16 engine vs training forward: max |diff| = " << worst << "\n";
}

}  // namespace
}  // namespace milesrt::serving
