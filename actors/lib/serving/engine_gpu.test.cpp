// The rollout engine on CUDA in bf16, with the paged attention kernels (head_dim 128) and with the
// per-sequence fallback (head_dim 32). Skipped without a GPU.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "actors/lib/llm/device.hpp"
#include "actors/lib/llm/lora.hpp"
#include "actors/lib/serving/engine.hpp"

namespace milesrt::serving {
namespace {

std::string config(int head_dim) {
  const int heads = 512 / head_dim;
  return R"({"model_type": "qwen3", "vocab_size": 512, "hidden_size": 256, "intermediate_size": 512,
    "num_hidden_layers": 2, "num_attention_heads": )" +
         std::to_string(heads) + R"(, "num_key_value_heads": )" + std::to_string(heads / 2) +
         R"(, "head_dim": )" + std::to_string(head_dim) +
         R"(, "rope_theta": 1000000.0, "tie_word_embeddings": true,
    "hidden_act": "silu"})";
}

class EngineCuda : public ::testing::TestWithParam<int> {};

// Groups with shared prompts, chunked prefill (a small step budget) mixed with decode rows, then
// the sampled tokens scored by the packed training forward: in bf16 both use the same weights, so
// they differ by bf16 rounding only; against an fp32 forward of the same (bf16-valued) weights,
// the difference is what bf16 serving costs.
TEST_P(EngineCuda, LogProbsMatchTheTrainingForwardAndFp32) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const int head_dim = GetParam();
  const at::Device cuda(at::kCUDA, 0);
  auto model = llm::decoder::random(config(head_dim), at::kBFloat16, cuda, 8);
  auto fp32 = llm::decoder::random(config(head_dim), at::kFloat, cuda, 8);
  fp32->set_params(model->params().copy(at::kFloat, cuda));
  EXPECT_EQ(model->make_cache(4, 16).paged_kernels(), head_dim == 128);
  engine e(*model, {256, 16, 64, 0});
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
  double worst_bf16 = 0, worst_fp32 = 0;
  for (const auto& s : out) {
    ASSERT_EQ(s.output.size(), 12u);
    std::vector<int64_t> full = s.prompt;
    full.insert(full.end(), s.output.begin(), s.output.end());
    auto scored = model->score_sequences({full}, 1.0)[0].logprobs.to(at::kCPU);
    auto exact = fp32->score_sequences({full}, 1.0)[0].logprobs.to(at::kCPU);
    for (size_t i = 0; i < s.output.size(); ++i) {
      const double lp = s.logprobs[i];
      worst_bf16 =
          std::max(worst_bf16, std::abs(lp - scored[s.prompt.size() - 1 + i].item<double>()));
      worst_fp32 =
          std::max(worst_fp32, std::abs(lp - exact[s.prompt.size() - 1 + i].item<double>()));
    }
  }
  std::cout << "head_dim " << head_dim
            << ": engine vs bf16 training forward max |diff| = " << worst_bf16
            << ", vs fp32 forward = " << worst_fp32 << "\n";
  EXPECT_LT(worst_bf16, 0.05);
  EXPECT_LT(worst_fp32, 0.05);
}

// Seeds: the same seed gives the same samples, another seed others, and the samples of one prompt
// each have their own stream. top-k 1 and a tiny top-p are greedy: each token is the argmax of the
// logits (up to bf16 rounding between the paged and the packed forward).
TEST_P(EngineCuda, TopKTopPAndSeedsBehave) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const int head_dim = GetParam();
  auto model = llm::decoder::random(config(head_dim), at::kBFloat16, at::Device(at::kCUDA, 0), 9);
  auto generate = [&](const sampling_params& p, uint64_t seed) {
    engine e(*model, {64, 16, 256, 0});
    generate_request q;
    q.id = 1;
    for (int i = 0; i < 20; ++i) q.prompt.push_back(i * 7 % 512);
    q.params = p;
    q.params.seed = seed;
    e.add(q);
    auto out = e.run();
    std::sort(out.begin(), out.end(),
              [](const sample& x, const sample& y) { return x.index < y.index; });
    return out;
  };
  sampling_params p;
  p.max_new_tokens = 24;
  p.n = 3;
  auto a = generate(p, 5), b = generate(p, 5), c = generate(p, 6);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(a[i].output, b[i].output);
  EXPECT_NE(a[0].output, c[0].output);
  EXPECT_NE(a[0].output, a[1].output);  // samples of one prompt have their own streams
  // top-k 1 is greedy: every sample the same, each token the argmax.
  p.top_k = 1;
  auto g = generate(p, 7);
  EXPECT_EQ(g[0].output, g[1].output);
  EXPECT_EQ(g[0].output, g[2].output);
  std::vector<int64_t> full = g[0].prompt;
  for (size_t i = 0; i < g[0].output.size(); ++i) {
    auto fr = model->forward({{full, 0, nullptr}}, {});
    auto logits = model->logits_rows(fr.hidden.narrow(0, fr.hidden.size(0) - 1, 1), 1.0);
    EXPECT_NEAR(logits.max().item<double>(), logits[0][g[0].output[i]].item<double>(), 0.05)
        << "token " << i;
    full.push_back(g[0].output[i]);
  }
  // top-p tiny: also the argmax.
  p.top_k = 0;
  p.top_p = 1e-6;
  auto t = generate(p, 8);
  EXPECT_EQ(t[0].output, g[0].output);
}

INSTANTIATE_TEST_SUITE_P(HeadDims, EngineCuda, ::testing::Values(128, 32));

// A MoE model on the device (paged attention, grouped experts, no host sync inside the forward):
// its samples' log-probs match the training forward's and each token records its experts.
TEST(EngineCudaMoe, GeneratesWithGroupedExpertsAndRecordsTheRouting) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  auto model =
      llm::decoder::random(R"({"model_type": "qwen3_moe", "vocab_size": 512, "hidden_size": 256,
    "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 128, "rope_theta": 1000000.0, "tie_word_embeddings": false, "hidden_act": "silu",
    "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 128, "norm_topk_prob": true,
    "decoder_sparse_step": 1, "mlp_only_layers": []})",
                           at::kBFloat16, at::Device(at::kCUDA, 0), 12);
  engine e(*model, {128, 16, 256, 0});
  for (uint64_t r = 0; r < 4; ++r) {
    generate_request q;
    q.id = r;
    for (int i = 0; i < 30 + 7 * int(r); ++i) q.prompt.push_back((i * 13 + r) % 512);
    q.params.n = 1;  // (a sample that reuses cached prompt blocks has no routing for them)
    q.params.max_new_tokens = 10;
    q.params.seed = r;
    e.add(q);
  }
  auto out = e.run();
  ASSERT_EQ(out.size(), 4u);
  double worst = 0;
  for (const auto& s : out) {
    std::vector<int64_t> full = s.prompt;
    full.insert(full.end(), s.output.begin(), s.output.end());
    ASSERT_EQ(s.experts.size(), full.size() - 1);
    for (const auto& e : s.experts) ASSERT_EQ(e.size(), 4u);  // 2 layers x top-2
    at::NoGradGuard no_grad;
    auto scored = model->score_sequences({full}, 1.0)[0].logprobs.to(at::kCPU);
    for (size_t i = 0; i < s.output.size(); ++i)
      worst = std::max(
          worst, std::abs(double(s.logprobs[i]) - scored[s.prompt.size() - 1 + i].item<double>()));
  }
  std::cout << "MoE engine vs training forward: max |diff| = " << worst << "\n";
  EXPECT_LT(worst, 0.05);
}

// CUDA graphs: decode steps replayed from graphs give exactly the tokens and log-probs of the same
// padded steps run eagerly, with sequences joining and leaving so that the batch crosses bucket
// edges (1, 2, 4, 8, 16, 24, ...), across a weight update that moves the parameters to a new
// buffer (the graphs are captured again) and one made in place (nothing to do), and through the
// pause modes (in place, retract, abort keep their meaning).
TEST(EngineCudaGraphs, ReplayEqualsEagerAcrossBucketsAndWeightUpdates) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const at::Device cuda(at::kCUDA, 0);
  struct run_result {
    std::vector<sample> samples;
    decode_graph_stats stats;
  };
  auto scenario = [&](engine_config::graphs mode, bool overlap) {
    auto model = llm::decoder::random(config(128), at::kBFloat16, cuda, 21);
    engine_config cfg{512, 16, 4096, 0};
    cfg.decode_graphs = mode;
    cfg.overlap_host = overlap;
    cfg.graph_max_batch = 32;
    engine e(*model, cfg);
    EXPECT_NE(e.graph_stats(), nullptr);
    uint64_t id = 0;
    auto add = [&](int count, int new_tokens) {
      for (int i = 0; i < count; ++i, ++id) {
        generate_request q;
        q.id = id;
        for (int t = 0; t < 10 + int(id % 7) * 9; ++t)
          q.prompt.push_back(int64_t((t * 31 + id * 5) % 512));
        q.params.max_new_tokens = new_tokens + int(id % 5) * 3;
        q.params.seed = 100 + id;
        q.params.temperature = 0.7 + 0.1 * double(id % 4);
        // A third of them stop on any of 40 tokens (~8% a step): sequences leave at random steps.
        if (id % 3 == 0)
          for (int64_t t = 0; t < 40; ++t) q.params.stop_token_ids.push_back(t * 12 + 5);
        e.add(q);
      }
    };
    std::vector<sample> all;
    auto steps = [&](int k) {
      for (int i = 0; i < k && !e.idle(); ++i) {
        auto d = e.step();
        all.insert(all.end(), d.begin(), d.end());
      }
    };
    add(1, 6);
    steps(4);  // batch 1
    add(3, 10);
    steps(6);  // 4 (and fewer as they finish)
    add(20, 12);
    steps(8);  // up to 24
    // New weights in a new buffer (a colocated trainer's copy): the graphs must follow.
    auto moved = model->params().copy(at::kBFloat16, cuda);
    const_cast<at::Tensor&>(moved->buffer()).mul_(1.01);
    moved->rebuild_views();
    model->set_params(moved);
    e.update_weights(1, pause_mode::in_place);
    steps(6);
    // New weights in place: same buffer, nothing to capture.
    const_cast<at::Tensor&>(model->params().buffer()).mul_(0.99);
    e.update_weights(2, pause_mode::in_place);
    add(9, 5);
    steps(3);
    // retract: in-flight sequences go back to the queue and prefill again (eagerly), then decode
    // in graphs again; abort: what is in flight comes back as "abort".
    auto none = e.update_weights(3, pause_mode::retract);
    EXPECT_TRUE(none.empty());
    steps(4);
    add(4, 30);
    steps(3);
    auto aborted = e.update_weights(4, pause_mode::abort);
    EXPECT_FALSE(aborted.empty());
    for (const auto& a : aborted) EXPECT_EQ(a.finish_reason, "abort");
    all.insert(all.end(), aborted.begin(), aborted.end());
    // Colocated training takes the KV pool away and gives it back: the graphs go with the cache
    // (they hold its addresses) and are captured again after retake; retracted sequences are
    // recomputed and finish as if undisturbed (the eager scenario does the same).
    add(6, 8);
    steps(3);
    const double kv_gib =
        double(cfg.num_blocks * model->kv_block_bytes(cfg.block_size)) / double(1ull << 30);
    const double held = llm::allocated_memory_gib(cuda);
    EXPECT_TRUE(e.release_kv(pause_mode::retract).empty());
    const double released = llm::allocated_memory_gib(cuda);
    EXPECT_LT(released, held - 0.9 * kv_gib) << "the KV pool's memory was not given back";
    e.retake_kv();
    EXPECT_GT(llm::allocated_memory_gib(cuda), released + 0.9 * kv_gib);
    steps(2);
    add(3, 6);
    while (!e.idle()) steps(1);
    std::sort(all.begin(), all.end(),
              [](const sample& a, const sample& b) { return a.request_id < b.request_id; });
    return run_result{all, *e.graph_stats()};
  };
  auto graphs = scenario(engine_config::graphs::capture, true);
  auto eager = scenario(engine_config::graphs::padded_eager, true);
  // Each step staged only after the last one's samples are back: the same samples.
  auto serial = scenario(engine_config::graphs::capture, false);
  ASSERT_EQ(graphs.samples.size(), 46u);
  for (const auto* other : {&eager, &serial}) {
    ASSERT_EQ(other->samples.size(), 46u);
    for (size_t i = 0; i < graphs.samples.size(); ++i) {
      EXPECT_EQ(graphs.samples[i].output, other->samples[i].output)
          << "request " << graphs.samples[i].request_id;
      EXPECT_EQ(graphs.samples[i].logprobs, other->samples[i].logprobs)
          << "request " << graphs.samples[i].request_id;
      EXPECT_EQ(graphs.samples[i].finish_reason, other->samples[i].finish_reason);
      EXPECT_EQ(graphs.samples[i].versions, other->samples[i].versions);
    }
  }
  int stopped = 0;
  for (const auto& s : graphs.samples) stopped += s.finish_reason == "stop";
  EXPECT_GT(stopped, 0) << "no sequence left on a stop token";
  EXPECT_GT(graphs.stats.replays, 20u);
  EXPECT_GE(graphs.stats.captures,
            6u);  // buckets 1, 2, 4, 8, 16, 24 at least, and again after the move
  EXPECT_EQ(graphs.stats.eager, 0u);
  EXPECT_EQ(eager.stats.replays, 0u);
  EXPECT_GT(eager.stats.eager, 20u);
  // Most decode steps were staged while the one before ran; some were not (a stop token, a
  // sequence joining), and those were staged again.
  EXPECT_GT(graphs.stats.staged_ahead_used, graphs.stats.replays / 3);
  EXPECT_LT(graphs.stats.staged_ahead_used, graphs.stats.staged_ahead);
  EXPECT_EQ(serial.stats.staged_ahead, 0u);
  std::cout << "graphs: " << graphs.stats.captures << " captures, " << graphs.stats.replays
            << " replays, " << graphs.stats.staged_ahead_used << " of " << graphs.stats.staged_ahead
            << " steps staged ahead used\n";
}

// LoRA on the GPU: an engine serving a bf16 model with adapters on every projection replays its
// decode graphs with the very tokens and log-probs of the same steps run eagerly, across an update
// of the adapters in place (the same buffer: the graphs replay as they are) and one into a new
// buffer (captured again); and the adapters are really applied (the base alone samples otherwise).
TEST(EngineCudaGraphs, LoraAdaptersReplayAsEagerAcrossAdapterUpdates) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const at::Device cuda(at::kCUDA, 0);
  llm::lora_config c;
  c.rank = 8;
  c.alpha = 16;
  c.target_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  // Seeded: the three scenarios must draw the same adapters (the device's default generator moves
  // on from one scenario to the next).
  auto fill = [](const at::Tensor& buffer, uint64_t seed) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const_cast<at::Tensor&>(buffer).copy_(at::normal(0.0, 0.05, buffer.sizes(), gen));
  };
  auto scenario = [&](engine_config::graphs mode, bool adapters) {
    auto model = llm::decoder::random(config(128), at::kBFloat16, cuda, 21);
    if (adapters) {
      auto a = llm::make_adapters(model->config(), c, at::kBFloat16, cuda, 3);
      fill(a->buffer(), 3);  // B non-zero: the model moves
      model->set_adapters(a, c);
    }
    engine_config cfg{512, 16, 4096, 0};
    cfg.decode_graphs = mode;
    cfg.graph_max_batch = 32;
    engine e(*model, cfg);
    uint64_t id = 0;
    std::vector<sample> all;
    auto round = [&](int count) {
      for (int i = 0; i < count; ++i, ++id) {
        generate_request q;
        q.id = id;
        for (int t = 0; t < 12 + int(id % 5) * 7; ++t)
          q.prompt.push_back(int64_t((t * 37 + id * 3) % 512));
        q.params.max_new_tokens = 10 + int(id % 4) * 2;
        q.params.seed = 50 + id;
        q.params.temperature = 0.8;
        e.add(q);
      }
      while (!e.idle()) {
        auto d = e.step();
        all.insert(all.end(), d.begin(), d.end());
      }
    };
    round(3);
    round(12);
    if (adapters) {  // in place: the adapters' buffer keeps its address
      const_cast<at::Tensor&>(model->adapters()->buffer()).mul_(1.5);
      e.update_weights(1, pause_mode::in_place);
      round(6);
      auto moved = llm::make_adapters(model->config(), c, at::kBFloat16, cuda, 4);
      fill(moved->buffer(), 4);
      model->set_published(moved);  // a new buffer: the graphs are captured again
      e.update_weights(2, pause_mode::in_place);
      round(9);
    }
    std::sort(all.begin(), all.end(),
              [](const sample& a, const sample& b) { return a.request_id < b.request_id; });
    return std::make_pair(all, *e.graph_stats());
  };
  auto [graphs, gstats] = scenario(engine_config::graphs::capture, true);
  auto [eager, estats] = scenario(engine_config::graphs::padded_eager, true);
  auto [base, bstats] = scenario(engine_config::graphs::capture, false);
  ASSERT_EQ(graphs.size(), 30u);
  ASSERT_EQ(eager.size(), 30u);
  for (size_t i = 0; i < graphs.size(); ++i) {
    EXPECT_EQ(graphs[i].output, eager[i].output) << "request " << graphs[i].request_id;
    EXPECT_EQ(graphs[i].logprobs, eager[i].logprobs) << "request " << graphs[i].request_id;
  }
  EXPECT_GT(gstats.replays, 10u);
  EXPECT_EQ(estats.replays, 0u);
  int differ = 0;  // the first 15 requests of both runs had the same prompts and seeds
  for (size_t i = 0; i < 15; ++i) differ += graphs[i].logprobs != base[i].logprobs;
  EXPECT_GT(differ, 10) << "the adapters changed nothing: are they applied?";
}

}  // namespace
}  // namespace milesrt::serving
