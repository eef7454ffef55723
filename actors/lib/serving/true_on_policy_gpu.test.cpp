// The true on-policy mode on CUDA (docs/design/true-on-policy.md): with the batch-invariant
// kernels, the log-prob the engine records for every sampled token equals, bit for bit, the one
// the training forward computes for it, whatever the engine's batches were (groups sharing cached
// prompt blocks, prefill in chunks beside decode rows, several CUDA-graph buckets) and however the
// trainer packs its micro-batch; greedy tokens are an argmax of the training forward's logits
// (with ties, any of the largest: top-k 1 samples among them). Dense Qwen3 and Qwen3-MoE shapes
// with random weights, MoE with routing replay on and off. Skipped without a GPU.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "actors/lib/serving/engine.hpp"

namespace milesrt::serving {
namespace {

const char* kDense = R"({"model_type": "qwen3", "vocab_size": 512, "hidden_size": 256,
  "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4,
  "num_key_value_heads": 2, "head_dim": 128, "rope_theta": 1000000.0,
  "tie_word_embeddings": true, "hidden_act": "silu"})";
const char* kMoe = R"({"model_type": "qwen3_moe", "vocab_size": 512, "hidden_size": 256,
  "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4,
  "num_key_value_heads": 2, "head_dim": 128, "rope_theta": 1000000.0,
  "tie_word_embeddings": false, "hidden_act": "silu", "num_experts": 8,
  "num_experts_per_tok": 2, "moe_intermediate_size": 128, "norm_topk_prob": true,
  "decoder_sparse_step": 1, "mlp_only_layers": []})";

/// Requests of different prompt lengths, `n` samples each (n > 1: the group shares cached blocks).
std::vector<sample> generate(llm::decoder& model, int64_t step_tokens, int64_t n, int64_t top_k,
                             double temperature) {
  engine e(model, {256, 16, step_tokens, 0});
  for (uint64_t r = 0; r < 6; ++r) {
    generate_request q;
    q.id = r;
    for (int i = 0; i < 9 + 23 * int(r); ++i) q.prompt.push_back((i * 29 + 7 * r + 1) % 512);
    q.params.n = n;
    q.params.max_new_tokens = 6 + 5 * int(r);  // sequences leave: the decode batch shrinks
    q.params.seed = 100 + r;
    q.params.temperature = temperature;
    q.params.top_k = top_k;
    e.add(q);
  }
  return e.run();
}

/// Per MoE layer [rows, k]: the engine's experts of each packed row (the trainer's replay).
std::vector<at::Tensor> replayed(const std::vector<const sample*>& group, int64_t layers,
                                 int64_t k) {
  std::vector<std::vector<int64_t>> rows(layers);
  for (const auto* s : group) {
    const int64_t L = static_cast<int64_t>(s->prompt.size() + s->output.size());
    EXPECT_EQ(static_cast<int64_t>(s->experts.size()), L - 1);
    for (int64_t l = 0; l < layers; ++l)
      for (int64_t t = 0; t < L; ++t)
        for (int64_t j = 0; j < k; ++j) rows[l].push_back(t < L - 1 ? s->experts[t][l * k + j] : j);
  }
  std::vector<at::Tensor> out;
  for (auto& r : rows) out.push_back(at::tensor(r, at::kLong).view({-1, k}));
  return out;
}

/// The training forward (autograd on over the flat parameters, as the trainer runs it) of `group`
/// packed in one micro-batch: each sample's log-probs of its output tokens, and whether each token
/// is an argmax of its logits row (ties count: top-k 1 samples among equal largest logits).
struct trained {
  std::vector<at::Tensor> logprobs, is_max;
};
trained train_forward(llm::decoder& model, const std::vector<const sample*>& group,
                      double temperature, bool replay) {
  std::vector<llm::segment> segs;
  std::vector<int64_t> rows, targets;
  int64_t row = 0;
  for (const auto* s : group) {
    std::vector<int64_t> full = s->prompt;
    full.insert(full.end(), s->output.begin(), s->output.end());
    for (size_t i = 0; i < s->output.size(); ++i) {
      rows.push_back(row + static_cast<int64_t>(s->prompt.size() + i) - 1);
      targets.push_back(s->output[i]);
    }
    row += static_cast<int64_t>(full.size());
    segs.push_back({full, 0, nullptr});
  }
  llm::forward_options fo;
  std::vector<at::Tensor> experts;
  const auto& c = model.config();
  if (replay) {
    experts = replayed(group, c.num_layers, c.num_experts_per_tok);
    fo.replay_experts = &experts;
  }
  auto fr = model.forward(segs, fo);
  auto picked = fr.hidden.index_select(0, at::tensor(rows, at::kLong).to(model.device()));
  auto sc = model.score_rows(picked, at::tensor(targets, at::kLong), temperature);
  auto lp = sc.logprobs.detach().to(at::kCPU);
  auto logits = model.logits_rows(picked.detach(), temperature);
  auto tgt = at::tensor(targets, at::kLong).to(logits.device()).unsqueeze(1);
  auto top = logits.gather(1, tgt).squeeze(1).eq(std::get<0>(logits.max(-1))).to(at::kCPU);
  trained out;
  int64_t at_row = 0;
  for (const auto* s : group) {
    const auto n = static_cast<int64_t>(s->output.size());
    out.logprobs.push_back(lp.narrow(0, at_row, n));
    out.is_max.push_back(top.narrow(0, at_row, n));
    at_row += n;
  }
  return out;
}

/// The number of sampled tokens whose engine log-prob differs, in any bit, from the training
/// forward's, over two packings of the trainer's micro-batches (all samples at once; each alone),
/// and the largest difference.
struct mismatch {
  int64_t tokens = 0, differ = 0, not_argmax = 0;
  double worst = 0;
};
mismatch compare(llm::decoder& trainer, const std::vector<sample>& out, double temperature,
                 bool replay, bool greedy) {
  mismatch m;
  std::vector<const sample*> all;
  for (const auto& s : out) all.push_back(&s);
  std::vector<std::vector<const sample*>> packings = {all};
  for (const auto* s : all) packings.push_back({s});
  for (const auto& group : packings) {
    auto t = train_forward(trainer, group, temperature, replay);
    for (size_t i = 0; i < group.size(); ++i) {
      const auto& s = *group[i];
      auto lp = t.logprobs[i].contiguous();
      auto top = t.is_max[i].contiguous();
      for (size_t j = 0; j < s.output.size(); ++j) {
        const float mine = lp.data_ptr<float>()[j];
        m.tokens++;
        m.differ += mine != s.logprobs[j];
        m.worst = std::max(m.worst, std::abs(double(mine) - double(s.logprobs[j])));
        if (greedy) m.not_argmax += !top.data_ptr<bool>()[j];
      }
    }
  }
  return m;
}

void expect_exact(const char* config, bool moe) {
  const at::Device cuda(at::kCUDA, 0);
  auto engine_model = llm::decoder::random(config, at::kBFloat16, cuda, 21);
  auto trainer_model = llm::decoder::random(config, at::kBFloat16, cuda, 21);
  engine_model->set_batch_invariant(true);
  trainer_model->set_batch_invariant(true);
  trainer_model->mutable_params().enable_grad();  // the trainer's forward: autograd on
  struct variant {
    const char* what;
    int64_t step_tokens, n, top_k;
    double temperature;
  };
  // 40 tokens a step: prompts come in chunks beside decode rows. n = 3: groups share cached
  // prompt blocks (MoE: n = 1, so that every token has the routing replay needs).
  const std::vector<variant> variants = {
      {"sampled, chunked prefill", 40, moe ? 1 : 3, 0, 0.8},
      {"sampled, whole prompts", 512, moe ? 1 : 3, 0, 1.0},
      {"greedy (top-k 1)", 64, 1, 1, 1.0},
  };
  for (const auto& v : variants) {
    auto out = generate(*engine_model, v.step_tokens, v.n, v.top_k, v.temperature);
    ASSERT_EQ(out.size(), 6u * v.n);
    for (bool replay : moe ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
      const auto m = compare(*trainer_model, out, v.temperature, replay, v.top_k == 1);
      std::cout << (moe ? "MoE, " : "dense, ") << v.what << (replay ? ", routing replay" : "")
                << ": " << m.differ << " of " << m.tokens
                << " tokens differ, max |diff| = " << m.worst << "\n";
      EXPECT_EQ(m.differ, 0) << v.what;
      EXPECT_EQ(m.worst, 0.0) << v.what;
      EXPECT_EQ(m.not_argmax, 0) << v.what;
    }
  }
}

TEST(TrueOnPolicyCuda, DenseEngineLogProbsEqualTheTrainingForwardBitForBit) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  expect_exact(kDense, false);
}

TEST(TrueOnPolicyCuda, MoeEngineLogProbsEqualTheTrainingForwardBitForBit) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  expect_exact(kMoe, true);
}

// Off, the same engine and trainer differ in the last bits (the fast kernels): what the mode buys.
TEST(TrueOnPolicyCuda, WithoutTheModeTheFastKernelsDiffer) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const at::Device cuda(at::kCUDA, 0);
  auto engine_model = llm::decoder::random(kDense, at::kBFloat16, cuda, 21);
  auto trainer_model = llm::decoder::random(kDense, at::kBFloat16, cuda, 21);
  trainer_model->mutable_params().enable_grad();
  auto out = generate(*engine_model, 40, 3, 0, 1.0);
  const auto m = compare(*trainer_model, out, 1.0, false, false);
  std::cout << "mode off: " << m.differ << " of " << m.tokens
            << " tokens differ, max |diff| = " << m.worst << "\n";
  EXPECT_GT(m.differ, 0);
  EXPECT_LT(m.worst, 0.05);
}

// The mode's limits are stated, not computed around.
TEST(TrueOnPolicyCuda, TheModeRefusesWhatItCannotServe) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const at::Device cuda(at::kCUDA, 0);
  auto fp32 = llm::decoder::random(kDense, at::kFloat, cuda, 1);
  try {
    fp32->set_batch_invariant(true);
    ADD_FAILURE() << "fp32 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("bf16"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace milesrt::serving
