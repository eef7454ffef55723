// LoRA in the decoder: peft's names, shapes and initialisation, the settings' checks, the adapted
// forward's bitwise agreement of the training and serving paths, gradients that reach only the
// adapters, dropout only where asked, and the merged option's difference.
#include "actors/lib/llm/lora.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <random>

#include "actors/lib/llm/model.hpp"
#include "actors/lib/llm/shared_bases.hpp"
#include "actors/lib/llm/tiny_model_testing.hpp"

namespace milesrt::llm {
namespace {

const std::vector<std::string> kAll = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                       "gate_proj", "up_proj", "down_proj"};

/// A Qwen2-shaped model (q/k/v biases, untied head) with GQA and sizes multiples of 16.
const std::string kTinyQwen2 =
    R"({"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "vocab_size": 64,
  "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
  "num_key_value_heads": 2, "rms_norm_eps": 1e-6, "hidden_act": "silu", "rope_theta": 10000.0,
  "tie_word_embeddings": false})";

lora_config config_of(int64_t rank, std::vector<std::string> modules = kAll) {
  lora_config c;
  c.rank = rank;
  c.alpha = 2.0 * static_cast<double>(rank);
  c.target_modules = std::move(modules);
  return c;
}

/// Adapters with every B random too (peft starts B at zero; a trained adapter has both).
std::shared_ptr<flat_params> trained_adapters(const decoder& m, const lora_config& c,
                                              uint64_t seed) {
  auto a = make_adapters(m.config(), c, m.dtype(), m.device(), seed);
  at::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed + 1);
  a->buffer().copy_(at::randn({a->buffer().numel()}, gen) * 0.1);
  a->rebuild_views();
  return a;
}

std::vector<std::vector<int64_t>> sequences(int64_t vocab) {
  std::mt19937 rng(11);
  std::vector<std::vector<int64_t>> seqs;
  for (int len : {2, 5, 17, 30}) {
    std::vector<int64_t> s;
    for (int i = 0; i < len; ++i) s.push_back(static_cast<int64_t>(rng() % vocab));
    seqs.push_back(s);
  }
  return seqs;
}

/// Path (b): a prefill of each sequence's first third, then one token a step, all sequences
/// batched, through a paged cache; the log-prob of each next token.
std::vector<std::vector<float>> served_logprobs(const decoder& m,
                                                const std::vector<std::vector<int64_t>>& seqs) {
  const int64_t block = 4;
  auto cache = m.make_cache(64, block);
  std::vector<std::vector<int32_t>> tables(seqs.size());
  int32_t next = 0;
  for (size_t s = 0; s < seqs.size(); ++s)
    for (size_t b = 0; b * block < seqs[s].size(); ++b) tables[s].push_back(next++);
  std::vector<int64_t> done(seqs.size(), 0);
  std::vector<std::vector<float>> out(seqs.size());
  bool first = true;
  while (true) {
    std::vector<segment> segs;
    std::vector<std::pair<size_t, int64_t>> work;
    for (size_t s = 0; s < seqs.size(); ++s) {
      const int64_t left = static_cast<int64_t>(seqs[s].size()) - done[s];
      if (left <= 0) continue;
      const int64_t n = first ? std::max<int64_t>(1, left / 3) : 1;
      segs.push_back(
          {std::vector<int64_t>(seqs[s].begin() + done[s], seqs[s].begin() + done[s] + n), done[s],
           &tables[s]});
      work.push_back({s, n});
    }
    if (work.empty()) break;
    first = false;
    forward_options fo;
    fo.cache = &cache;
    auto fr = m.forward(segs, fo);
    int64_t row = 0;
    for (auto [s, n] : work) {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t pos = done[s] + i;
        if (pos + 1 < static_cast<int64_t>(seqs[s].size())) {
          auto r = m.score_rows(fr.hidden.narrow(0, row + i, 1),
                                at::tensor({seqs[s][pos + 1]}, at::kLong), 1.0);
          out[s].push_back(r.logprobs.item<float>());
        }
      }
      row += n;
      done[s] += n;
    }
  }
  return out;
}

TEST(Lora, TensorsAreNamedShapedAndInitialisedAsPeftDoes) {
  auto m = testing::tiny_model(1);
  auto c = config_of(4, {"q_proj", "down_proj"});
  auto specs = lora_parameter_specs(m->config(), c);
  ASSERT_EQ(specs.size(), 8u);  // 2 layers x 2 modules x (A, B)
  EXPECT_EQ(specs[0].first, "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
  EXPECT_EQ(specs[0].second, (std::vector<int64_t>{4, 32}));
  EXPECT_EQ(specs[1].first, "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight");
  EXPECT_EQ(specs[1].second, (std::vector<int64_t>{32, 4}));  // 2 heads x 16
  EXPECT_EQ(specs[2].first, "base_model.model.model.layers.0.mlp.down_proj.lora_A.weight");
  EXPECT_EQ(specs[2].second, (std::vector<int64_t>{4, 64}));
  EXPECT_EQ(specs[3].second, (std::vector<int64_t>{32, 4}));
  auto a = make_adapters(m->config(), c, at::kFloat, at::kCPU, 7);
  for (const auto& [name, shape] : specs) {
    const auto& t = a->get(name);
    if (name.find("lora_B") != std::string::npos) {
      EXPECT_EQ(t.abs().max().item<float>(), 0.0f) << name;
    } else {
      // kaiming_uniform_(a = sqrt(5)): U(-1/sqrt(in), 1/sqrt(in)), spread over the interval.
      const double bound = 1.0 / std::sqrt(static_cast<double>(shape[1]));
      EXPECT_LE(t.abs().max().item<double>(), bound) << name;
      EXPECT_GT(t.abs().max().item<double>(), 0.8 * bound) << name;
    }
  }
  // Seeded: the same seed gives the same adapters, another seed others.
  EXPECT_TRUE(
      at::equal(a->buffer(), make_adapters(m->config(), c, at::kFloat, at::kCPU, 7)->buffer()));
  EXPECT_FALSE(
      at::equal(a->buffer(), make_adapters(m->config(), c, at::kFloat, at::kCPU, 8)->buffer()));
  // rsLoRA scales by alpha / sqrt(r).
  EXPECT_DOUBLE_EQ(c.scale(), 2.0);
  c.use_rslora = true;
  EXPECT_DOUBLE_EQ(c.scale(), 4.0);
}

TEST(Lora, SettingsProblemsNameTheField) {
  auto m = testing::tiny_model(1);
  auto first = [&](lora_config c, const model_config* mc) {
    auto p = lora_config_problems(c, mc);
    return p.empty() ? std::string() : p.front().text();
  };
  auto c = config_of(8);
  EXPECT_EQ(first(c, &m->config()), "");
  c.rank = 0;
  EXPECT_EQ(first(c, nullptr).rfind("rank: must be between 1 and 4096", 0), 0u);
  c.rank = 5000;
  EXPECT_EQ(first(c, nullptr).rfind("rank:", 0), 0u);
  c = config_of(8);
  c.alpha = std::nan("");
  EXPECT_EQ(first(c, nullptr), "alpha: must be finite and > 0");
  c.alpha = 0;
  EXPECT_EQ(first(c, nullptr), "alpha: must be finite and > 0");
  c = config_of(8);
  c.dropout = 1;
  EXPECT_EQ(first(c, nullptr), "dropout: must be in [0, 1)");
  c = config_of(8, {"q_proj", "qkv_proj"});
  EXPECT_EQ(first(c, nullptr).rfind("targetModules: unknown module 'qkv_proj' (known: q_proj,", 0),
            0u);
  c = config_of(8, {});
  EXPECT_EQ(first(c, nullptr).rfind("targetModules: must name at least one module", 0), 0u);
  // The experts of a MoE model are refused; its attention is not.
  auto moe = testing::tiny_model(1, testing::kTinyQwen3Moe);
  c = config_of(8, {"q_proj", "up_proj"});
  EXPECT_NE(first(c, &moe->config()).find("'up_proj' would adapt the experts"), std::string::npos);
  c = config_of(8, {"q_proj", "v_proj"});
  EXPECT_EQ(first(c, &moe->config()), "");
  // ... through targetParameters, peft's names of the fused expert tensors.
  c.target_parameters = {"mlp.experts.down_proj"};
  EXPECT_EQ(first(c, &moe->config()), "");
  c.target_modules = {};
  EXPECT_EQ(first(c, &moe->config()), "");
  c.dropout = 0.1;
  EXPECT_EQ(first(c, &moe->config()),
            "dropout: must be 0 with targetParameters (as peft requires)");
  c.dropout = 0;
  c.target_parameters = {"mlp.experts.gate_proj"};
  EXPECT_EQ(first(c, &moe->config()),
            "targetParameters: unknown parameter 'mlp.experts.gate_proj' (known: "
            "mlp.experts.gate_up_proj, mlp.experts.down_proj)");
  c.target_parameters = {"mlp.experts.down_proj"};
  auto dense = testing::tiny_model(1);
  EXPECT_EQ(first(c, &dense->config()),
            "targetParameters: 'mlp.experts.down_proj' names the experts of mixture-of-experts "
            "layers; the model has none");
  try {
    lora_parameter_specs(moe->config(), config_of(8, {"gate_proj"}));
    ADD_FAILURE() << "MoE experts accepted";
  } catch (const config_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("lora.targetModules:", 0), 0u) << e.what();
  }
}

TEST(Lora, ZeroBAdaptersLeaveTheBaseBitwiseAndAdaptersOffIsTheBase) {
  auto m = testing::tiny_model(3);
  auto seqs = sequences(32);
  auto base = m->score_sequences(seqs, 1.0);
  auto c = config_of(8);
  m->set_adapters(make_adapters(m->config(), c, at::kFloat, at::kCPU, 1), c);
  auto fresh = m->score_sequences(seqs, 1.0);
  m->set_adapters(trained_adapters(*m, c, 2), c);
  auto adapted = m->score_sequences(seqs, 1.0);
  auto off = m->score_sequences(seqs, 1.0, 256, nullptr, /*adapters_off=*/true);
  bool changed = false;
  for (size_t s = 0; s < seqs.size(); ++s) {
    EXPECT_TRUE(at::equal(base[s].logprobs, fresh[s].logprobs)) << "sequence " << s;
    EXPECT_TRUE(at::equal(base[s].logprobs, off[s].logprobs)) << "sequence " << s;
    changed = changed || !at::equal(base[s].logprobs, adapted[s].logprobs);
  }
  EXPECT_TRUE(changed) << "trained adapters did not change a log-prob";
}

class LoraPaths : public ::testing::TestWithParam<std::tuple<std::string, int64_t>> {};

// The adapted model's training forward (one packed pass) against its serving forward (prefill,
// then decode steps through a paged cache, sequences batched): bitwise equal in fp32 on the CPU,
// for every module adapted, at an odd rank and a usual one, with and without q/k/v biases.
TEST_P(LoraPaths, TrainingAndServingPathsAgreeBitwise) {
  const auto& [family, rank] = GetParam();
  const bool moe = family == "qwen3_moe";
  auto m = family == "qwen2"
               ? decoder::random(kTinyQwen2, at::kFloat, at::kCPU, 4)
               : testing::tiny_model(4, moe ? testing::kTinyQwen3Moe : testing::kTinyQwen3);
  auto c = moe ? config_of(rank, {"q_proj", "k_proj", "v_proj", "o_proj"}) : config_of(rank);
  if (moe) c.target_parameters = lora_parameter_names();  // every expert's gate_up and down
  c.use_rslora = rank == 3;
  m->set_adapters(trained_adapters(*m, c, 9), c);
  auto seqs = sequences(m->config().vocab_size);
  auto packed = m->score_sequences(seqs, 1.0, 16);
  auto served = served_logprobs(*m, seqs);
  for (size_t s = 0; s < seqs.size(); ++s) {
    auto lp = packed[s].logprobs.contiguous();
    ASSERT_EQ(lp.numel(), static_cast<int64_t>(served[s].size()));
    for (int64_t i = 0; i < lp.numel(); ++i)
      ASSERT_EQ(lp.data_ptr<float>()[i], served[s][i]) << "sequence " << s << " position " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, LoraPaths,
                         ::testing::Values(std::make_tuple(std::string("qwen3"), int64_t{3}),
                                           std::make_tuple(std::string("qwen3"), int64_t{16}),
                                           std::make_tuple(std::string("qwen2"), int64_t{8}),
                                           std::make_tuple(std::string("qwen3_moe"), int64_t{3}),
                                           std::make_tuple(std::string("qwen3_moe"), int64_t{8})));

// Dense (every module) and MoE (attention and every expert's gate_up_proj and down_proj).
TEST(Lora, GradientsReachOnlyTheAdapters) {
  for (const bool moe : {false, true}) {
    auto m = testing::tiny_model(5, moe ? testing::kTinyQwen3Moe : testing::kTinyQwen3);
    auto c = moe ? config_of(4, {"q_proj", "o_proj"}) : config_of(4);
    if (moe) c.target_parameters = lora_parameter_names();
    m->set_adapters(trained_adapters(*m, c, 3), c);
    m->adapters()->enable_grad();
    auto seqs = sequences(32);
    auto sc = m->score_sequences(seqs, 1.0);
    at::Tensor loss = at::zeros({});
    for (auto& s : sc) loss = loss - s.logprobs.sum();
    loss.backward();
    EXPECT_FALSE(m->params().grad().defined()) << "the base got a gradient buffer";
    for (const auto& name : m->params().names())
      EXPECT_FALSE(m->params().get(name).requires_grad()) << name;
    for (const auto& name : m->adapters()->names())
      EXPECT_GT(m->adapters()->get(name).grad().abs().sum().item<double>(), 0.0) << name;
  }
}

TEST(Lora, DropoutOnlyWhereAskedAndTheSameSeedGivesTheSameMasks) {
  auto m = testing::tiny_model(6);
  auto c = config_of(4);
  c.dropout = 0.3;
  m->set_adapters(trained_adapters(*m, c, 4), c);
  std::vector<segment> segs = {{{1, 2, 3, 4, 5, 6, 7, 8, 9}, 0, nullptr}};
  auto hidden = [&](bool dropout, uint64_t seed) {
    forward_options fo;
    fo.lora_dropout = dropout;
    fo.lora_dropout_seed = seed;
    return m->forward(segs, fo).hidden;
  };
  auto plain = hidden(false, 0);
  EXPECT_TRUE(at::equal(plain, hidden(false, 5)));  // no dropout without lora_dropout
  auto a = hidden(true, 5);
  EXPECT_FALSE(at::equal(plain, a));
  EXPECT_TRUE(at::equal(a, hidden(true, 5)));
  EXPECT_FALSE(at::equal(a, hidden(true, 6)));
  // A layer computed again for activation checkpointing draws the same masks: its gradients are
  // those of the plain backward.
  m->adapters()->enable_grad();
  auto grads = [&](bool checkpointed) {
    m->adapters()->grad().zero_();
    forward_options fo;
    fo.lora_dropout = true;
    fo.lora_dropout_seed = 9;
    if (checkpointed) {
      fo.checkpoint_head = [](const at::Tensor& h) { return h.pow(2).sum(); };
      m->forward(segs, fo);
    } else {
      m->forward(segs, fo).hidden.pow(2).sum().backward();
    }
    return m->adapters()->grad().clone();
  };
  auto direct = grads(false), recomputed = grads(true);
  EXPECT_TRUE(at::allclose(direct, recomputed, 1e-5, 1e-6))
      << (direct - recomputed).abs().max().item<double>();
}

// The merged option: a copy of the base with W + scale B A serves log-probs that differ from the
// unmerged forward's by rounding only; the figure is printed (docs/lora.md quotes it).
TEST(Lora, MergedServingDiffersFromUnmergedByRoundingOnly) {
  auto m = testing::tiny_model(7);
  auto c = config_of(8);
  m->set_adapters(trained_adapters(*m, c, 5), c);
  auto seqs = sequences(32);
  auto unmerged = m->score_sequences(seqs, 1.0);
  m->serve_merged(m->params().copy(at::kFloat, at::kCPU));
  auto merged = m->score_sequences(seqs, 1.0);
  double worst = 0;
  for (size_t s = 0; s < seqs.size(); ++s)
    worst = std::max(worst, (merged[s].logprobs - unmerged[s].logprobs).abs().max().item<double>());
  std::cout << "merged vs unmerged log-probs, fp32 CPU: max |diff| = " << worst << "\n";
  EXPECT_GT(worst, 0.0) << "merged serving did not change the computation at all";
  EXPECT_LT(worst, 1e-5);
  // A new version of the adapters reaches the merged weights in place.
  const void* before = m->params().buffer().data_ptr();
  at::NoGradGuard no_grad;
  m->adapters()->buffer().mul_(0);
  m->refresh_merged();
  EXPECT_EQ(m->params().buffer().data_ptr(), before);
  auto zero = m->score_sequences(seqs, 1.0, 256, nullptr, true);
  m->clear_adapters();
  auto base = m->score_sequences(seqs, 1.0);
  for (size_t s = 0; s < seqs.size(); ++s)
    EXPECT_TRUE(at::allclose(zero[s].logprobs, base[s].logprobs, 0, 1e-6));
}

// The experts' adapters in peft's fused layout: expert e's delta of gate_up_proj is
// B[:, j*E + e] A[e*r + j] (j < r), gate's rows then up's. The merged weights (each expert's
// gate_proj, up_proj, down_proj) give the forward's log-probs up to rounding, so the forward and
// the merge read the layout alike; and each expert's adapter changes the log-probs.
TEST(Lora, ExpertAdaptersMergeAsTheForwardAppliesThem) {
  auto m = testing::tiny_model(7, testing::kTinyQwen3Moe);
  auto c = config_of(4, {"q_proj"});
  c.target_parameters = lora_parameter_names();
  const auto specs = lora_parameter_specs(m->config(), c);
  ASSERT_EQ(specs.size(), 2u * 2 * 3);  // two layers: q_proj, gate_up_proj, down_proj
  EXPECT_EQ(specs[2].first, "base_model.model.model.layers.0.mlp.experts.base_layer.lora_A.weight");
  EXPECT_EQ(specs[2].second, (std::vector<int64_t>{16, 32}));  // [r * E, hidden]
  EXPECT_EQ(specs[3].second, (std::vector<int64_t>{64, 16}));  // [2 * moe_intermediate, r * E]
  EXPECT_EQ(specs[4].first, "base_model.model.model.layers.0.mlp.experts.lora_A.weight");
  EXPECT_EQ(specs[4].second, (std::vector<int64_t>{16, 32}));  // [r * E, moe_intermediate]
  EXPECT_EQ(specs[5].second, (std::vector<int64_t>{32, 16}));  // [hidden, r * E]
  auto alone = c;
  alone.target_parameters = {"mlp.experts.gate_up_proj"};
  EXPECT_EQ(lora_parameter_specs(m->config(), alone)[2].first,
            "base_model.model.model.layers.0.mlp.experts.lora_A.weight");
  auto seqs = sequences(32);
  auto base = m->score_sequences(seqs, 1.0);
  m->set_adapters(trained_adapters(*m, c, 5), c);
  auto unmerged = m->score_sequences(seqs, 1.0);
  m->serve_merged(m->params().copy(at::kFloat, at::kCPU));
  auto merged = m->score_sequences(seqs, 1.0);
  double worst = 0, change = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    worst = std::max(worst, (merged[s].logprobs - unmerged[s].logprobs).abs().max().item<double>());
    change = std::max(change, (base[s].logprobs - unmerged[s].logprobs).abs().max().item<double>());
  }
  std::cout << "MoE experts, merged vs unmerged: max |diff| = " << worst
            << " (adapters vs base: " << change << ")\n";
  EXPECT_LT(worst, 1e-5);
  EXPECT_GT(change, 1e-3);
}

TEST(Lora, SetAdaptersRefusesOtherSettingsNamingTheTensor) {
  auto m = testing::tiny_model(1);
  auto c = config_of(4, {"q_proj"});
  auto other = config_of(8, {"q_proj"});
  try {
    m->set_adapters(make_adapters(m->config(), other, at::kFloat, at::kCPU, 1), c);
    ADD_FAILURE() << "adapters of rank 8 accepted for rank 4";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("q_proj.lora_A.weight"), std::string::npos) << e.what();
  }
  EXPECT_EQ(m->lora(), nullptr);
}

// A LoRA trainer, a LoRA engine and a reference model of one folder in one process share one copy
// of the frozen base; another dtype is another copy, and a folder nobody holds any more is loaded
// again.
TEST(SharedBases, OneCopyOfAFolderPerProcess) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("milesrt_shared_bases_" + std::to_string(::getpid()));
  testing::tiny_model(4)->save(dir);
  shared_bases bases;
  bool shared = true;
  auto a = bases.load(dir, at::kFloat, at::kCPU, &shared);
  EXPECT_FALSE(shared);
  auto b = bases.load(dir / "." / "", at::kFloat, at::kCPU, &shared);
  EXPECT_TRUE(shared);
  EXPECT_EQ(a->params().buffer().data_ptr(), b->params().buffer().data_ptr());
  EXPECT_EQ(b->config_json(), a->config_json());
  auto c = bases.load(dir, at::kBFloat16, at::kCPU, &shared);
  EXPECT_FALSE(shared);
  // The adapters stay each model's own: the base alone is shared.
  auto cfg = config_of(4);
  b->set_adapters(trained_adapters(*b, cfg, 1), cfg);
  EXPECT_EQ(a->lora(), nullptr);
  auto seqs = sequences(32);
  EXPECT_TRUE(at::equal(a->score_sequences(seqs, 1.0)[3].logprobs,
                        b->score_sequences(seqs, 1.0, 256, nullptr, true)[3].logprobs));
  a.reset();
  b.reset();
  bases.load(dir, at::kFloat, at::kCPU, &shared);
  EXPECT_FALSE(shared);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace milesrt::llm
