#include "actors/lib/serving/engine.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <set>

namespace milesrt::serving {
namespace {

std::string config(const std::string& type) {
  std::string common = R"("vocab_size": 128, "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": false, "hidden_act": "silu")";
  if (type == "moe") {
    return R"({"model_type": "qwen3_moe", "num_experts": 4, "num_experts_per_tok": 2,
      "moe_intermediate_size": 32, "norm_topk_prob": true, )" +
           common + "}";
  }
  return R"({"model_type": "qwen3", )" + common + "}";
}

std::vector<int64_t> prompt(int len, int salt) {
  std::vector<int64_t> p;
  for (int i = 0; i < len; ++i) p.push_back((i * 31 + salt * 7 + 3) % 128);
  return p;
}

generate_request req(uint64_t id, std::vector<int64_t> p, int64_t n, int64_t max_new,
                     uint64_t seed) {
  generate_request r;
  r.id = id;
  r.prompt = std::move(p);
  r.params.n = n;
  r.params.max_new_tokens = max_new;
  r.params.seed = seed;
  r.params.temperature = 0.9;
  return r;
}

std::map<std::pair<uint64_t, int64_t>, sample> by_key(const std::vector<sample>& v) {
  std::map<std::pair<uint64_t, int64_t>, sample> m;
  for (const auto& s : v) m[{s.request_id, s.index}] = s;
  return m;
}

class Engine : public ::testing::Test {
 protected:
  std::unique_ptr<llm::decoder> model_ =
      llm::decoder::random(config("dense"), at::kFloat, at::kCPU, 3);
};

TEST(KvBlocks, RadixCacheSharesEvictsAndFlushes) {
  block_allocator blocks(6);
  radix_cache cache(blocks, 2);
  std::vector<int32_t> table = {*blocks.allocate(), *blocks.allocate(), *blocks.allocate()};
  cache.insert({1, 2, 3, 4, 5}, table);  // two whole blocks
  EXPECT_EQ(cache.cached_blocks(), 2);
  auto hit = cache.match({1, 2, 3, 4, 9, 9}, 6);
  EXPECT_EQ(hit, (std::vector<int32_t>{table[0], table[1]}));
  EXPECT_EQ(blocks.refs(table[0]), 3);  // the table, the cache, the match
  for (auto b : hit) blocks.release(b);
  for (auto b : table) blocks.release(b);
  EXPECT_EQ(blocks.free_blocks(), 4);  // the cache still holds two
  EXPECT_EQ(cache.evict(5), 2);        // leaf first, then its parent
  EXPECT_EQ(blocks.free_blocks(), 6);
  EXPECT_EQ(cache.match({1, 2}, 2).size(), 0u);
}

TEST_F(Engine, EightSamplesOfOnePromptAllocateItsBlocksOnce) {
  engine e(*model_, {64, 8, 256, 64});
  e.add(req(1, prompt(37, 1), 8, 5, 11));
  auto out = e.run();
  ASSERT_EQ(out.size(), 8u);
  // The first sample: ceil((37 + 4) / 8) = 6 blocks; each sibling shares the 4 whole blocks of
  // the prompt's first 36 tokens and allocates 2 of its own: 6 + 7 * 2.
  EXPECT_EQ(e.blocks().allocations(), 20u);
  EXPECT_GT(e.stats().prefix_hit_rate, 0.8);
  std::set<std::vector<int64_t>> distinct;
  for (const auto& s : out) distinct.insert(s.output);
  EXPECT_GT(distinct.size(), 1u);  // samples of one prompt differ
}

TEST_F(Engine, ASecondTurnReusesTheFirstTurnsBlocks) {
  engine e(*model_, {64, 8, 256, 64});
  e.add(req(1, prompt(21, 2), 1, 6, 5));
  auto first = e.run();
  ASSERT_EQ(first.size(), 1u);
  auto before = e.blocks().allocations();
  auto turn2 = first[0].prompt;
  turn2.insert(turn2.end(), first[0].output.begin(), first[0].output.end());
  auto extra = prompt(9, 3);
  turn2.insert(turn2.end(), extra.begin(), extra.end());  // 36 tokens
  e.add(req(2, turn2, 1, 1, 5));
  e.run();
  // Turn one computed 21 + 5 = 26 tokens: its 3 whole blocks are reused; turn two needs
  // ceil(36 / 8) = 5 blocks, so it allocates only 2.
  EXPECT_EQ(e.blocks().allocations() - before, 2u);
}

TEST_F(Engine, DeterministicAndEqualToTheTrainingForwardBitwise) {
  auto run = [&](engine_config cfg) {
    engine e(*model_, cfg);
    e.add(req(1, prompt(23, 4), 3, 12, 7));
    e.add(req(2, prompt(5, 5), 2, 9, 8));
    e.add(req(3, prompt(40, 6), 1, 7, 9));
    return by_key(e.run());
  };
  auto a = run({64, 8, 256, 64});
  auto b = run({64, 8, 256, 64});
  // A small step budget (chunked prefill) and few blocks (preemption) change the batches, not the
  // tokens: the forward is batch-invariant and each sample has its own random stream.
  engine tight(*model_, {12, 8, 16, 64});
  tight.add(req(1, prompt(23, 4), 3, 12, 7));
  tight.add(req(2, prompt(5, 5), 2, 9, 8));
  tight.add(req(3, prompt(40, 6), 1, 7, 9));
  auto c = by_key(tight.run());
  EXPECT_GT(tight.stats().preemptions, 0u);
  ASSERT_EQ(a.size(), 6u);
  for (auto& [key, s] : a) {
    EXPECT_EQ(s.output, b[key].output);
    EXPECT_EQ(s.output, c[key].output) << "request " << key.first << " sample " << key.second;
    EXPECT_EQ(s.logprobs, c[key].logprobs);
    EXPECT_EQ(int64_t(s.output.size()), key.first == 1   ? 12
                                        : key.first == 2 ? 9
                                                         : 7);  // never truncated
    std::vector<int64_t> full = s.prompt;
    full.insert(full.end(), s.output.begin(), s.output.end());
    auto scored = model_->score_sequences({full}, 0.9)[0].logprobs;
    for (size_t i = 0; i < s.output.size(); ++i) {
      ASSERT_EQ(scored[s.prompt.size() - 1 + i].item<float>(), s.logprobs[i])
          << "train/rollout log-prob differ at output token " << i;
    }
  }
}

TEST_F(Engine, StopTokensAndTopKTopP) {
  engine e(*model_, {64, 8, 256, 64});
  auto r = req(1, prompt(10, 7), 4, 30, 3);
  r.params.top_k = 3;
  r.params.top_p = 0.9;
  // Stop on whatever the first sample produces first.
  engine probe(*model_, {64, 8, 256, 64});
  probe.add(r);
  auto first = by_key(probe.run());
  r.params.stop_token_ids = {first[std::make_pair(uint64_t(1), int64_t(0))].output[2]};
  e.add(r);
  auto out = by_key(e.run());
  const auto& first_sample = out[std::make_pair(uint64_t(1), int64_t(0))];
  EXPECT_EQ(first_sample.finish_reason, "stop");
  EXPECT_EQ(first_sample.output.size(), 3u);
  for (auto& [k, s] : out) {
    EXPECT_TRUE(s.finish_reason == "stop" || s.output.size() == 30u);
    for (float lp : s.logprobs) EXPECT_LE(lp, 0.f);  // full-vocabulary log-probs, not renormalized
  }
}

// Colocated training gives the KV pool back and takes it again: the cache is gone in between
// (step() refuses, requests still queue), retracted sequences are recomputed after retake and
// finish with the tokens and log-probs of an undisturbed run; aborted ones are returned.
TEST_F(Engine, ReleasesAndRetakesTheKvPool) {
  auto start = [&](engine& e) {
    e.add(req(1, prompt(23, 4), 3, 12, 7));
    e.add(req(2, prompt(5, 5), 2, 9, 8));
  };
  engine plain(*model_, {64, 8, 256, 64});
  start(plain);
  auto want = by_key(plain.run());

  engine e(*model_, {64, 8, 256, 64});
  start(e);
  for (int i = 0; i < 5; ++i) e.step();
  EXPECT_GT(e.stats().used_blocks, 0);
  EXPECT_TRUE(e.release_kv(pause_mode::retract).empty());
  EXPECT_TRUE(e.kv_released());
  EXPECT_EQ(e.stats().used_blocks, 0);
  EXPECT_EQ(e.stats().cached_blocks, 0);
  EXPECT_EQ(e.stats().running, 0);
  EXPECT_EQ(e.stats().waiting, 5);
  EXPECT_THROW(e.step(), std::logic_error);
  e.add(req(3, prompt(40, 6), 1, 7, 9));  // queued while released
  e.retake_kv();
  EXPECT_FALSE(e.kv_released());
  auto got = by_key(e.run());
  ASSERT_EQ(got.size(), 6u);
  for (auto& [key, s] : want) {
    EXPECT_EQ(got[key].output, s.output) << "request " << key.first << " sample " << key.second;
    EXPECT_EQ(got[key].logprobs, s.logprobs);
  }
  EXPECT_EQ(got[std::make_pair(uint64_t(3), int64_t(0))].output.size(), 7u);

  // Aborting instead returns every sequence in flight, and the engine works on after retake.
  engine a(*model_, {64, 8, 256, 64});
  start(a);
  for (int i = 0; i < 3; ++i) a.step();
  auto aborted = a.release_kv(pause_mode::abort);
  EXPECT_EQ(aborted.size(), 5u);
  for (const auto& s : aborted) EXPECT_EQ(s.finish_reason, "abort");
  EXPECT_TRUE(a.idle());
  a.retake_kv();
  a.add(req(4, prompt(9, 3), 1, 5, 2));
  EXPECT_EQ(a.run().size(), 1u);
}

TEST_F(Engine, WeightUpdatesAbortRetractOrKeepGoing) {
  for (auto mode : {pause_mode::abort, pause_mode::retract, pause_mode::in_place}) {
    engine e(*model_, {64, 8, 256, 64});
    e.add(req(1, prompt(12, 8), 2, 10, 1));
    for (int i = 0; i < 4; ++i) e.step();
    EXPECT_GT(e.stats().cached_blocks, 0);
    auto aborted = e.update_weights(1, mode);
    EXPECT_EQ(e.stats().cached_blocks, 0);  // the prefix cache is flushed on every update
    if (mode == pause_mode::abort) {
      ASSERT_EQ(aborted.size(), 2u);
      EXPECT_EQ(aborted[0].finish_reason, "abort");
      EXPECT_TRUE(e.idle());
      continue;
    }
    auto out = e.run();
    ASSERT_EQ(out.size(), 2u);
    for (const auto& s : out) {
      ASSERT_EQ(s.output.size(), 10u);
      // Tokens before the update carry version 0, after it version 1.
      EXPECT_EQ(s.versions.front(), 0u);
      EXPECT_EQ(s.versions.back(), 1u);
    }
  }
}

// Partial rollout: samples an abort cut off are resumed; under unchanged weights they finish with
// the tokens and log-probs of an undisturbed run (their random streams go on where they stopped),
// and their tokens carry the version of the weights each was sampled under.
TEST_F(Engine, AbortedSamplesResumeWhereTheyStopped) {
  auto start = [&](engine& e) {
    e.add(req(1, prompt(17, 2), 3, 11, 5));
    e.add(req(2, prompt(6, 3), 2, 8, 6));
  };
  engine plain(*model_, {64, 8, 256, 64});
  start(plain);
  auto want = by_key(plain.run());

  engine e(*model_, {64, 8, 256, 64});
  start(e);
  for (int i = 0; i < 4; ++i) e.step();
  auto cut = e.update_weights(1, pause_mode::abort);  // the same parameters, a new version
  ASSERT_EQ(cut.size(), 5u);
  EXPECT_TRUE(e.idle());
  size_t partial = 0;
  for (const auto& s : cut) {
    partial += s.output.empty() ? 0 : 1;
    auto params =
        req(s.request_id, {}, 1, s.request_id == 1 ? 11 : 8, s.request_id == 1 ? 5 : 6).params;
    e.resume(s, params);
  }
  EXPECT_GE(partial, 4u);  // most had tokens when they were cut off
  auto got = by_key(e.run());
  ASSERT_EQ(got.size(), 5u);
  for (auto& [key, s] : want) {
    SCOPED_TRACE("request " + std::to_string(key.first) + " sample " + std::to_string(key.second));
    const auto& g = got[key];
    EXPECT_EQ(g.output, s.output);
    EXPECT_EQ(g.logprobs, s.logprobs);
    EXPECT_EQ(g.finish_reason, "length");
    // Version 0 up to the cut, 1 after it.
    const auto& before = by_key(cut)[key];
    ASSERT_EQ(g.versions.size(), g.output.size());
    for (size_t t = 0; t < g.versions.size(); ++t)
      EXPECT_EQ(g.versions[t], t < before.output.size() ? 0u : 1u) << t;
  }
  // Only what an abort cut off resumes.
  EXPECT_THROW(e.resume(want.begin()->second, req(1, {}, 1, 11, 5).params), std::invalid_argument);
}

TEST(EngineMoe, RecordsRoutedExpertsThatTheTrainerCanReplay) {
  auto model = llm::decoder::random(config("moe"), at::kFloat, at::kCPU, 4);
  engine e(*model, {64, 8, 256, 64});
  e.add(req(1, prompt(19, 9), 1, 6, 2));
  auto out = e.run();
  ASSERT_EQ(out.size(), 1u);
  const auto& s = out[0];
  std::vector<int64_t> full = s.prompt;
  full.insert(full.end(), s.output.begin(), s.output.end());
  ASSERT_EQ(s.experts.size(), full.size() - 1);
  ASSERT_EQ(s.experts[0].size(), 2u * 2u);  // 2 MoE layers x top-2
  // Replaying the recorded experts in the training forward reproduces the engine's log-probs.
  std::vector<int64_t> ids(full.begin(), full.end() - 1);
  std::vector<at::Tensor> replay;
  for (int layer = 0; layer < 2; ++layer) {
    auto t = at::empty({int64_t(ids.size()), 2}, at::kLong);
    for (size_t p = 0; p < ids.size(); ++p)
      for (int k = 0; k < 2; ++k) t[p][k] = s.experts[p][layer * 2 + k];
    replay.push_back(t);
  }
  auto fr = model->forward({{ids, 0, nullptr}}, {nullptr, &replay});
  auto rows = fr.hidden.narrow(0, int64_t(s.prompt.size()) - 1, int64_t(s.output.size()));
  auto lp = model->score_rows(rows, at::tensor(s.output, at::kLong), 0.9).logprobs;
  for (size_t i = 0; i < s.output.size(); ++i) EXPECT_EQ(lp[i].item<float>(), s.logprobs[i]);
}

}  // namespace
}  // namespace milesrt::serving
