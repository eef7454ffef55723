// policy_trainer driven directly on tiny CPU fp32 models: bitwise resume from a checkpoint, the
// direction of a GRPO step, zero advantages leave the weights alone, train/rollout log-prob
// agreement with the rollout engine, MoE routing replay, SFT, and non-finite steps.
#include "actors/trainer/trainer_core.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "actors/lib/llm/tiny_model_testing.hpp"
#include "actors/lib/serving/engine.hpp"
#include "actors/lib/weights/apply.hpp"
#include "actors/lib/weights/local_versions.hpp"
#include "actors/trainer/batch_layout.hpp"

namespace milesrt::trainer {
using namespace milesrt::rl;
namespace {
namespace fs = std::filesystem;

const std::string& dense_config = llm::testing::kTinyQwen3;
const std::string& moe_config = llm::testing::kTinyQwen3Moe;

std::unique_ptr<llm::decoder> tiny(const std::string& config = dense_config, uint64_t seed = 5) {
  return llm::testing::tiny_model(seed, config);
}

at::Tensor weights(policy_trainer& t) { return t.model().params().buffer().detach().clone(); }

bool bitwise_equal(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

std::vector<int64_t> tokens(int len, int salt) {
  std::vector<int64_t> v;
  for (int i = 0; i < len; ++i) v.push_back((i * 7 + salt * 11 + 3) % 32);
  return v;
}

train_sequence seq(int prompt_len, int output_len, int salt, float reward, int64_t group) {
  train_sequence s;
  s.prompt = tokens(prompt_len, salt);
  s.output = tokens(output_len, salt + 5);
  s.rollout_logprobs.assign(s.output.size(), -3.0f);
  s.reward = reward;
  s.group = group;
  return s;
}

/// Two groups of three samples with varied lengths and rewards; `salt` changes the tokens.
std::vector<train_sequence> rl_batch(int salt) {
  return {seq(5, 4, salt, 1, 0),     seq(5, 6, salt + 1, 0, 0), seq(5, 3, salt + 2, 0.5f, 0),
          seq(9, 5, salt + 3, 0, 1), seq(9, 2, salt + 4, 1, 1), seq(9, 7, salt + 5, 1, 1)};
}

/// Sum of log p(output) of each sequence under `m` (no grad).
std::vector<double> output_logprobs(const llm::decoder& m,
                                    const std::vector<train_sequence>& batch) {
  at::NoGradGuard no_grad;
  std::vector<std::vector<int64_t>> seqs;
  for (const auto& s : batch) {
    auto full = s.prompt;
    full.insert(full.end(), s.output.begin(), s.output.end());
    seqs.push_back(full);
  }
  auto sc = m.score_sequences(seqs, 1.0);
  std::vector<double> out;
  for (size_t i = 0; i < batch.size(); ++i) {
    const int64_t n = static_cast<int64_t>(batch[i].output.size());
    out.push_back(sc[i].logprobs.narrow(0, sc[i].logprobs.numel() - n, n).sum().item<double>());
  }
  return out;
}

struct temp_dir {
  fs::path path =
      fs::temp_directory_path() / ("milesrt_trainer_core_" + std::to_string(::getpid()) + "_" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  temp_dir() { fs::remove_all(path); }
  ~temp_dir() { fs::remove_all(path); }
};

trainer_options resume_options() {
  trainer_options o;
  o.optimizer.lr = 1e-2;
  o.optimizer.weight_decay = 0.01;
  o.optimizer.warmup_steps = 2;
  o.optimizer.schedule = "cosine";
  o.optimizer.total_steps = 8;
  o.micro_batch_tokens = 24;  // several micro-batches per step
  return o;
}

TEST(TrainerCore, ResumeFromACheckpointIsBitwiseExact) {
  temp_dir d;
  std::vector<std::vector<train_sequence>> batches = {rl_batch(0), rl_batch(1), rl_batch(2),
                                                      rl_batch(3)};
  policy_trainer a(tiny(), resume_options());
  std::vector<std::map<std::string, double>> ma;
  for (const auto& b : batches) ma.push_back(a.train(b));

  {
    policy_trainer b(tiny(), resume_options());
    b.train(batches[0]);
    b.train(batches[1]);
    b.save(d.path);
  }
  policy_trainer c(tiny(), resume_options());
  c.load(d.path);
  EXPECT_EQ(c.optimizer_steps(), 2u);
  for (int step = 2; step < 4; ++step) {
    auto mc = c.train(batches[step]);
    for (const auto& [k, v] : ma[step]) {
      if (k == "train_tokens_per_s" || k == "process_peak_rss_mib") continue;  // timing, memory
      ASSERT_TRUE(mc.count(k)) << k;
      EXPECT_EQ(mc[k], v) << "step " << step + 1 << ": " << k;
    }
    EXPECT_NE(mc["loss"], 0.0);
    EXPECT_GT(mc["grad_norm"], 0.0);
  }
  EXPECT_EQ(c.optimizer_steps(), 4u);
  EXPECT_TRUE(bitwise_equal(weights(a), weights(c)));
}

TEST(TrainerCore, GrpoStepRaisesTheRewardedSampleAndLowersTheOthers) {
  trainer_options o;
  o.optimizer.lr = 1e-3;
  policy_trainer t(tiny(), o);
  std::vector<train_sequence> group = {seq(6, 5, 1, 1, 0), seq(6, 5, 2, 0, 0), seq(6, 5, 3, 0, 0),
                                       seq(6, 5, 4, 0, 0)};
  auto before = output_logprobs(t.model(), group);
  auto m = t.train(group);
  auto after = output_logprobs(t.model(), group);
  EXPECT_GT(m["advantage_abs_mean"], 0.0);
  EXPECT_GT(after[0], before[0]);
  EXPECT_LT((after[1] + after[2] + after[3]) / 3, (before[1] + before[2] + before[3]) / 3);
}

TEST(TrainerCore, EqualRewardsGiveZeroAdvantageAndLeaveTheWeightsBitwiseUnchanged) {
  trainer_options o;
  o.optimizer.lr = 1e-2;
  o.optimizer.weight_decay = 0;
  policy_trainer t(tiny(), o);
  auto w0 = weights(t);
  std::vector<train_sequence> group = {seq(6, 5, 1, 0.5f, 0), seq(6, 4, 2, 0.5f, 0),
                                       seq(6, 3, 3, 0.5f, 0)};
  auto m = t.train(group);
  EXPECT_EQ(m["advantage_abs_mean"], 0.0);
  EXPECT_EQ(m["grad_norm"], 0.0);
  EXPECT_EQ(m["skipped_steps"], 0.0);
  EXPECT_EQ(t.optimizer_steps(), 1u);  // a real AdamW step whose update is exactly 0 (m = 0)
  EXPECT_TRUE(bitwise_equal(w0, weights(t)));
}

TEST(TrainerCore, RolloutEngineLogprobsEqualTrainingLogprobsBitwise) {
  auto serving = tiny();
  policy_trainer t(tiny(), {});
  ASSERT_TRUE(bitwise_equal(serving->params().buffer().detach(), weights(t)));
  serving::engine e(*serving, {64, 16, 256, 64});
  for (uint64_t id = 0; id < 2; ++id) {
    serving::generate_request r;
    r.id = id;
    r.prompt = tokens(id == 0 ? 5 : 11, static_cast<int>(id));
    r.params.n = 3;
    r.params.max_new_tokens = 7;
    r.params.seed = 17 + id;
    e.add(r);
  }
  auto samples = e.run();
  ASSERT_EQ(samples.size(), 6u);
  std::vector<train_sequence> batch;
  for (const auto& s : samples) {
    train_sequence x;
    x.prompt = s.prompt;
    x.output = s.output;
    x.rollout_logprobs = s.logprobs;
    x.reward = static_cast<float>(s.index == 0);
    x.group = static_cast<int64_t>(s.request_id);
    batch.push_back(std::move(x));
  }
  auto m = t.train(batch);
  EXPECT_EQ(m["train_rollout_logprob_abs_diff"], 0.0);
  EXPECT_EQ(m["train_rollout_logprob_abs_diff_max"], 0.0);
}

/// An MoE sequence, the router's experts and experts that differ from them everywhere, with the
/// log-probs of its output under each routing (from decoder::forward with and without replay).
struct moe_case {
  train_sequence s;
  std::vector<at::Tensor> router, other;  // per MoE layer [L, k]
  at::Tensor router_logprobs, replay_logprobs;
};

moe_case make_moe_case(const llm::decoder& m) {
  at::NoGradGuard no_grad;
  moe_case c;
  c.s.prompt = tokens(6, 1);
  c.s.output = tokens(5, 2);
  c.s.reward = 1;
  auto full = c.s.prompt;
  full.insert(full.end(), c.s.output.begin(), c.s.output.end());
  const int64_t L = static_cast<int64_t>(full.size()), P = static_cast<int64_t>(c.s.prompt.size());
  const int64_t k = m.config().num_experts_per_tok, E = m.config().num_experts;
  std::vector<llm::segment> segs = {{full, 0, nullptr}};
  auto rows = at::arange(P - 1, L - 1, at::kLong);
  auto targets = at::tensor(c.s.output, at::kLong);
  auto fr = m.forward(segs, {});
  c.router = fr.experts;
  c.router_logprobs = m.score_rows(fr.hidden.index_select(0, rows), targets, 1.0).logprobs;
  // The experts the router did not pick (E = 2k): a routing that differs on every token.
  for (const auto& layer : c.router) {
    auto r = layer.contiguous();
    std::vector<int64_t> alt;
    for (int64_t t = 0; t < L; ++t) {
      for (int64_t e = 0; e < E; ++e) {
        bool picked = false;
        for (int64_t j = 0; j < k; ++j) picked |= r[t][j].item<int64_t>() == e;
        if (!picked) alt.push_back(e);
      }
    }
    c.other.push_back(at::tensor(alt, at::kLong).view({L, k}));
  }
  for (int64_t t = 0; t + 1 < L; ++t)
    for (const auto& layer : c.other)
      for (int64_t j = 0; j < k; ++j) c.s.experts.push_back(layer[t][j].item<int64_t>());
  llm::forward_options fo;
  fo.replay_experts = &c.other;
  auto fr2 = m.forward(segs, fo);
  c.replay_logprobs = m.score_rows(fr2.hidden.index_select(0, rows), targets, 1.0).logprobs;
  return c;
}

TEST(TrainerCore, RoutingReplayTrainsWithTheRolloutExperts) {
  auto ref = tiny(moe_config, 9);
  auto c = make_moe_case(*ref);
  ASSERT_EQ(c.s.experts.size(), (c.s.prompt.size() + c.s.output.size() - 1) * 2 * 2);
  const double gap = (c.replay_logprobs - c.router_logprobs).abs().mean().item<double>();
  ASSERT_GT(gap, 1e-4) << "the other experts should change the log-probs";

  trainer_options o;
  o.optimizer.lr = 0;  // the weights stay those of `ref`
  policy_trainer t(tiny(moe_config, 9), o);
  auto x = c.s;
  auto to_vec = [](const at::Tensor& lp) {
    return std::vector<float>(lp.data_ptr<float>(), lp.data_ptr<float>() + lp.numel());
  };
  x.rollout_logprobs = to_vec(c.replay_logprobs);
  auto m = t.train({x});
  EXPECT_EQ(m["train_rollout_logprob_abs_diff"], 0.0)
      << "training did not use the rollout's experts";
  x.rollout_logprobs = to_vec(c.router_logprobs);
  m = t.train({x});
  EXPECT_EQ(m["train_rollout_logprob_abs_diff"], gap);

  // Replay off: the router's own choice.
  o.routing_replay = false;
  policy_trainer off(tiny(moe_config, 9), o);
  m = off.train({x});
  EXPECT_EQ(m["train_rollout_logprob_abs_diff"], 0.0);
}

TEST(TrainerCore, ExpertLoadOfAnMoeBatchFromTheRolloutRouting) {
  auto ref = tiny(moe_config, 9);
  auto c = make_moe_case(*ref);
  c.s.rollout_logprobs.assign(c.s.output.size(), -1.0f);
  // Count by hand: per token, per layer (2), top-k (2); 4 experts.
  std::vector<std::vector<double>> counts(2, std::vector<double>(4, 0));
  for (size_t i = 0; i < c.s.experts.size(); ++i) counts[(i / 2) % 2][c.s.experts[i]] += 1;
  double max_sum = 0;
  std::vector<double> want;
  for (const auto& layer : counts) {
    double n = 0, mx = 0;
    for (double x : layer) n += x;
    for (double x : layer) {
      want.push_back(x * 4 / n);
      mx = std::max(mx, x * 4 / n);
    }
    max_sum += mx;
  }
  policy_trainer t(tiny(moe_config, 9), {});
  std::map<std::string, std::vector<double>> lists;
  auto m = t.train({c.s}, &lists);
  EXPECT_EQ(lists["expert_load"], want);
  EXPECT_DOUBLE_EQ(m["moe_load_max"], max_sum / 2);
  EXPECT_GE(m["moe_load_max"], 1.0);
  EXPECT_GE(m["moe_load_cv"], 0.0);
  EXPECT_EQ(lists["response_length"], std::vector<double>{double(c.s.output.size())});
  EXPECT_EQ(lists["advantage"].size(), c.s.output.size());
  // A dense model reports none of them.
  policy_trainer dense(tiny(), {});
  auto d = c.s;
  d.experts.clear();
  lists.clear();
  m = dense.train({d}, &lists);
  EXPECT_EQ(m.count("moe_load_max"), 0u);
  EXPECT_EQ(lists.count("expert_load"), 0u);
}

TEST(TrainerCore, RoutingReplayRefusesExpertsOfTheWrongSizeNamingTheSequence) {
  auto ref = tiny(moe_config, 9);
  auto c = make_moe_case(*ref);
  c.s.rollout_logprobs.assign(c.s.output.size(), -1.0f);
  auto bad = c.s;
  bad.experts.pop_back();
  policy_trainer t(tiny(moe_config, 9), {});
  try {
    t.train({c.s, bad});
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("sequence 1"), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(bad.experts.size())), std::string::npos) << what;
  }
}

TEST(TrainerCore, SftLowersTheLossOnAFixedBatch) {
  trainer_options o;
  o.objective = "sft";
  o.optimizer.lr = 1e-2;
  policy_trainer t(tiny(), o);
  std::vector<train_sequence> batch = {seq(4, 6, 1, 0, 0), seq(7, 3, 2, 0, 1)};
  for (auto& s : batch) s.rollout_logprobs.clear();
  std::vector<double> losses;
  for (int i = 0; i < 5; ++i) losses.push_back(t.train(batch)["sft_loss"]);
  for (size_t i = 1; i < losses.size(); ++i)
    EXPECT_LT(losses[i], losses[i - 1]) << "step " << i + 1;
  EXPECT_LT(losses.back(), 0.8 * losses.front());
}

TEST(TrainerCore, ANanLossSkipsTheStepAndKeepsTheWeights) {
  trainer_options o;
  o.optimizer.lr = 1e-2;
  o.loss.tis = true;  // the weight exp(old - rollout) of a NaN rollout log-prob is NaN
  policy_trainer t(tiny(), o);
  auto w0 = weights(t);
  auto batch = rl_batch(0);
  batch[2].rollout_logprobs[1] = std::nanf("");
  auto m = t.train(batch);
  EXPECT_EQ(m["skipped_steps"], 1.0);
  EXPECT_EQ(t.optimizer_steps(), 0u);
  EXPECT_TRUE(bitwise_equal(w0, weights(t)));
  // The next good batch trains from there.
  m = t.train(rl_batch(1));
  EXPECT_EQ(m["skipped_steps"], 0.0);
  EXPECT_EQ(t.optimizer_steps(), 1u);
  EXPECT_TRUE(at::isfinite(weights(t)).all().item<bool>());
}

TEST(TrainerCore, AHugeLearningRateSkipsTheStepWhoseLossOverflows) {
  trainer_options o;
  o.optimizer.lr =
      1e30;  // step 1 moves every weight by about 1e30: finite, but the next forward overflows
  policy_trainer t(tiny(), o);
  auto m = t.train(rl_batch(0));
  EXPECT_EQ(m["skipped_steps"], 0.0);
  auto w1 = weights(t);
  ASSERT_TRUE(at::isfinite(w1).all().item<bool>());
  m = t.train(rl_batch(1));
  EXPECT_EQ(m["skipped_steps"], 1.0);
  // Either the loss or the gradient is no longer finite.
  EXPECT_FALSE(std::isfinite(m["loss"]) && std::isfinite(m["grad_norm"]))
      << m["loss"] << " " << m["grad_norm"];
  EXPECT_EQ(t.optimizer_steps(), 1u);
  EXPECT_TRUE(bitwise_equal(w1, weights(t)));
}

TEST(TrainerCore, ALearningRateBeyondFp32ThrowsAndKeepsTheWeights) {
  trainer_options o;
  o.optimizer.lr = 1e39;  // the step size itself does not fit in fp32
  policy_trainer t(tiny(), o);
  auto w0 = weights(t);
  EXPECT_ANY_THROW(t.train(rl_batch(0)));
  EXPECT_EQ(t.optimizer_steps(), 0u);
  EXPECT_TRUE(bitwise_equal(w0, weights(t)));
}

TEST(TrainerCore, AColocatedEngineSharingTheWeightsKeepsTheTrainerTraining) {
  // The engine shares the trainer's parameters; applying an update must not leave the trainer
  // with views that no longer carry gradients to its flat buffer.
  trainer_options o;
  o.optimizer.lr = 1e-2;
  policy_trainer t(tiny(), o);
  auto engine = tiny(dense_config, 9);
  weights::local_versions store;
  store.add_trainer("trainer", t.model().shared_params());
  weights::receiver r;
  weights::weights_update u;
  u.version = 1;
  u.transport = "colocated";
  u.channel = "trainer";
  u.share = true;
  r.apply(*engine, u, store);
  ASSERT_EQ(engine->params().buffer().data_ptr(), t.model().params().buffer().data_ptr());
  std::vector<train_sequence> batch(2);
  for (int i = 0; i < 2; ++i) {
    batch[i].prompt = {1, 2, 3, 4};
    batch[i].output = {5 + i, 6, 7};
    batch[i].rollout_logprobs = {-3, -3, -3};
    batch[i].reward = static_cast<float>(i);
  }
  auto before = engine->params().buffer().detach().clone();
  auto m = t.train(batch);
  EXPECT_GT(m["grad_norm"], 0.0);
  EXPECT_FALSE(at::equal(before, engine->params().buffer().detach()))
      << "the shared weights did not move";
  u.version = 2;
  r.apply(*engine, u, store);
  m = t.train(batch);
  EXPECT_GT(m["grad_norm"], 0.0);
}

}  // namespace
}  // namespace milesrt::trainer

namespace milesrt::trainer {
namespace {

// Activation checkpointing computes every layer again in the backward: the same losses and
// gradients as keeping the activations, so the weights after a few steps agree (to the float
// rounding of adding a tied embedding's two gradient parts in another order), for dense and MoE.
TEST(TrainerCore, ActivationCheckpointingTrainsLikeKeepingTheActivations) {
  for (const std::string* config : {&dense_config, &moe_config}) {
    trainer_options plain = resume_options(), ckpt = resume_options();
    ckpt.activation_checkpointing = true;
    ckpt.checkpoint_layers = 0;  // every layer
    policy_trainer a(tiny(*config), plain), b(tiny(*config), ckpt);
    for (int step = 0; step < 3; ++step) {
      auto ma = a.train(rl_batch(step)), mb = b.train(rl_batch(step));
      EXPECT_EQ(ma["loss"], mb["loss"]) << "step " << step;  // the forward is the same computation
      EXPECT_NEAR(ma["grad_norm"], mb["grad_norm"], 1e-6 * ma["grad_norm"]) << "step " << step;
    }
    auto wa = weights(a), wb = weights(b);
    policy_trainer untrained(tiny(*config), plain);
    EXPECT_FALSE(bitwise_equal(wa, weights(untrained)));  // it trained
    EXPECT_LT((wa - wb).abs().max().item<double>(), 1e-5);
  }
}

// Selective checkpointing: only the first layer is computed again, the second keeps its
// activations; the losses are the same computation and the weights after a few steps agree with
// keeping every activation. The tiny models have 2 layers, so 1 is a real split.
TEST(TrainerCore, CheckpointingOnlyTheFirstLayersTrainsLikeKeepingTheActivations) {
  for (const std::string* config : {&dense_config, &moe_config}) {
    trainer_options plain = resume_options(), some = resume_options();
    some.activation_checkpointing = true;
    some.checkpoint_layers = 1;
    policy_trainer a(tiny(*config), plain), b(tiny(*config), some);
    ASSERT_GT(a.model().config().num_layers, 1);
    for (int step = 0; step < 3; ++step) {
      auto ma = a.train(rl_batch(step)), mb = b.train(rl_batch(step));
      EXPECT_EQ(ma["loss"], mb["loss"]) << "step " << step;
      EXPECT_NEAR(ma["grad_norm"], mb["grad_norm"], 1e-6 * ma["grad_norm"]) << "step " << step;
    }
    auto wa = weights(a), wb = weights(b);
    policy_trainer untrained(tiny(*config), plain);
    EXPECT_FALSE(bitwise_equal(wa, weights(untrained)));
    EXPECT_LT((wa - wb).abs().max().item<double>(), 1e-5);
  }
}

}  // namespace
}  // namespace milesrt::trainer

namespace milesrt::trainer {
namespace {

/// PPO's surrogate under another name, counting its calls: a loss registered by the test.
class counting_ppo final : public rl::policy_loss {
 public:
  explicit counting_ppo(int* calls) : calls_(calls) {}
  at::Tensor surrogate(rl::policy_loss_context& c) const override {
    ++*calls_;
    return rl::clipped_surrogate(c, rl::token_ratio(c));
  }

 private:
  int* calls_;
};

TEST(TrainerCore, ARegisteredSurrogateIsTheOneTheTrainerUses) {
  int calls = 0;
  auto losses = rl::builtin_registries();
  losses.policy_losses.add("counting_ppo",
                           [&calls] { return std::make_unique<counting_ppo>(&calls); });
  trainer_options o = resume_options();
  o.policy_loss = "counting_ppo";
  policy_trainer a(tiny(), o, losses), b(tiny(), resume_options());
  for (int step = 0; step < 2; ++step) {
    auto ma = a.train(rl_batch(step)), mb = b.train(rl_batch(step));
    EXPECT_EQ(ma["loss"], mb["loss"]) << "step " << step;
  }
  EXPECT_EQ(calls, 2 * static_cast<int>(micro_batches(rl_batch(0), o.micro_batch_tokens).size()));
  EXPECT_GT(calls, 2);
  EXPECT_TRUE(bitwise_equal(weights(a), weights(b)));  // the same maths as the built-in ppo

  // GSPO by name: the same as PPO on-policy (every ratio is 1), not once the second update of a
  // step moves the ratios.
  trainer_options p = resume_options(), g = resume_options();
  p.updates_per_step = g.updates_per_step = 2;
  g.policy_loss = "gspo";
  policy_trainer pt(tiny(), p), gt(tiny(), g);
  pt.train(rl_batch(0));
  gt.train(rl_batch(0));
  EXPECT_FALSE(bitwise_equal(weights(pt), weights(gt)));

  o.policy_loss = "ppo2";
  try {
    policy_trainer bad(tiny(), o, losses);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "policy loss 'ppo2' is not one of: counting_ppo, gspo, ppo");
  }
}

}  // namespace
}  // namespace milesrt::trainer
