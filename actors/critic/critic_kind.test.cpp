// The critic kind as a real actor: it learns a known value function on a toy problem (the first
// prompt token decides the reward), its values sit at the positions that predict each output
// token, and snapshot/restore round-trips bitwise (files, pending groups, optimizer state).
#include "actors/critic/critic_kind.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <random>

#include "actors/critic/critic_core.hpp"
#include "actors/lib/llm/messages.hpp"
#include "actors/lib/llm/safetensors.hpp"
#include "actors/lib/llm/tiny_model_testing.hpp"
#include "milesrt/critic.capnp.h"
#include "runtime/testing/kind_testing.hpp"

namespace milesrt::critic {
namespace {
using namespace milesrt::runtime;
using namespace milesrt::kind_testing;
using llm::sample_group;
using llm::sample_msg;
namespace fs = std::filesystem;

/// Toy problem: prompt = [3 or 4, two random tokens], output = 3 random tokens; reward 1 when the
/// prompt starts with 3, else 0. With gamma = lambda = 1 the return at every output token is the
/// reward, so the true value function is V = 1 after a 3-prompt and V = 0 after a 4-prompt.
sample_group toy_group(std::mt19937& rng, uint64_t id, int n = 8) {
  std::uniform_int_distribution<int64_t> tok(5, 31);
  sample_group g;
  g.group_id = id;
  for (int i = 0; i < n; ++i) {
    sample_msg s;
    const bool good = i % 2 == 0;
    s.prompt = {good ? 3 : 4, tok(rng), tok(rng)};
    s.output = {tok(rng), tok(rng), tok(rng)};
    s.logprobs.assign(3, -1.0f);
    s.reward = good ? 1.0f : 0.0f;
    g.samples.push_back(std::move(s));
  }
  return g;
}

class CriticKind : public ::testing::Test {
 protected:
  void SetUp() override {
    // Tiny tensors: more OpenMP threads than free cores only make barriers wait (50x slower on a
    // loaded 2-core machine).
    at::set_num_threads(1);
    dir_ = fs::temp_directory_path() / ("milesrt-critic-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    llm::testing::tiny_model(11)->save(dir_ / "init");
    register_critic_kind(registry_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  caf::actor spawn(caf::actor_system& sys, double lr, uint32_t train_batch) {
    params_of<schema::CriticParams> p;
    p->setModel((dir_ / "init").string());
    p->setLr(lr);
    p->setTrainBatch(train_batch);
    return registry_.find("critic")->spawn(sys, p.setup());
  }
  /// The group with values set by the actor's "groups" port.
  sample_group values(caf::actor_system& sys, const caf::actor& a, const sample_group& g) {
    auto r =
        ask<node_reply>(sys, a, process_atom::value, std::string("groups"), wrap(g, g.group_id));
    EXPECT_TRUE(r) << sys.render(r.error());
    if (!r) return {};
    EXPECT_EQ(r->outputs.size(), 1u);
    EXPECT_EQ(r->outputs[0].port, "groups");
    return r->outputs[0].item.payload.get_as<sample_group>(0);
  }
  /// One training step on `g` (a batch of one group), as the driver sends it.
  metric_map train(caf::actor_system& sys, const caf::actor& a, const sample_group& g) {
    auto r = ask<train_reply>(sys, a, train_atom::value, ++steps_,
                              std::vector<envelope>{wrap(g, g.group_id)});
    EXPECT_TRUE(r) << sys.render(r.error());
    if (!r) return {};
    EXPECT_TRUE(r->outputs.empty());
    versions_[a.address()].push_back(r->version);
    return r->metrics;
  }
  uint64_t steps_ = 0;
  std::map<caf::actor_addr, std::vector<uint64_t>>
      versions_;  ///< per actor, the versions it answered

  fs::path dir_;
  kind_registry registry_;
};

TEST_F(CriticKind, LearnsTheValueOfAToyProblem) {
  test_system ts(registry_);
  auto critic = spawn(ts.sys(), 1e-3, 1);
  std::mt19937 rng(1);
  // Values before training: a zero head gives 0 everywhere.
  auto probe = values(ts.sys(), critic, toy_group(rng, 0));
  for (const auto& s : probe.samples) EXPECT_EQ(s.values, std::vector<float>(3, 0.0f));

  const int kSteps = 150;
  std::vector<double> losses;
  for (int step = 0; step < kSteps; ++step) {
    // The real dataflow: values first (critic.groups), then the same group trains (critic.train).
    auto g = values(ts.sys(), critic, toy_group(rng, step + 1));
    auto m = train(ts.sys(), critic, g);
    ASSERT_EQ(m.count("critic_loss"), 1u);
    ASSERT_EQ(m.count("critic_grad_norm"), 1u);
    losses.push_back(m["critic_loss"]);
  }
  auto mean = [&](int from, int to) {
    double s = 0;
    for (int i = from; i < to; ++i) s += losses[i];
    return s / (to - from);
  };
  const double first = mean(0, 10), last = mean(kSteps - 10, kSteps);
  std::cout << "critic_loss: first 10 steps " << first << ", last 10 steps " << last << "\n";
  EXPECT_NEAR(losses[0], 0.25, 1e-6);  // 0.5 * mean(R^2): the zero head gives V = 0
  EXPECT_LT(last, 0.01 * first);

  // Held-out prompts: every value within 0.05 of the expected return (about 0.01 measured).
  double worst = 0;
  for (int k = 0; k < 4; ++k) {
    auto g = values(ts.sys(), critic, toy_group(rng, 1000 + k));
    for (const auto& s : g.samples) {
      ASSERT_EQ(s.values.size(), s.output.size());
      for (float v : s.values) worst = std::max(worst, std::abs(double(v) - s.reward));
    }
  }
  std::cout << "max |V - expected return| on held-out prompts: " << worst << "\n";
  EXPECT_LT(worst, 0.05);
}

/// The head applied by hand to the hidden states of a model folder the critic saved: the values
/// sit at positions P-1 .. P+O-2.
std::vector<float> values_by_hand(const fs::path& model_dir, const sample_msg& s) {
  auto model = llm::decoder::load(model_dir, at::kFloat, at::kCPU);
  llm::safetensors_checkpoint ck(model_dir / value_head_file);
  const auto& w = ck.get("value_head.weight");
  const auto& b = ck.get("value_head.bias");
  auto wt = at::from_blob(const_cast<uint8_t*>(w.data), {32}, at::kFloat).clone();
  const float bias = *reinterpret_cast<const float*>(b.data);
  auto full = s.prompt;
  full.insert(full.end(), s.output.begin(), s.output.end());
  auto fr = model->forward({{full, 0, nullptr}}, {});
  std::vector<float> out;
  const int64_t P = static_cast<int64_t>(s.prompt.size());
  for (size_t t = 0; t < s.output.size(); ++t) {
    out.push_back((fr.hidden[P - 1 + static_cast<int64_t>(t)] * wt).sum().item<float>() + bias);
  }
  return out;
}

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST_F(CriticKind, SnapshotRestoreRoundTripsBitwise) {
  test_system ts(registry_);
  auto a = spawn(ts.sys(), 1e-3, 2);
  std::mt19937 rng(2);
  // Three training steps: a batch of three groups with trainBatch 2 (two optimizer steps), then
  // two batches of one group.
  {
    std::vector<envelope> three;
    for (int i = 0; i < 3; ++i)
      three.push_back(wrap(values(ts.sys(), a, toy_group(rng, i)), uint64_t(i)));
    auto r = ask<train_reply>(ts.sys(), a, train_atom::value, uint64_t{1}, three);
    ASSERT_TRUE(r) << ts.sys().render(r.error());
    EXPECT_EQ(r->version, 1u);
    EXPECT_EQ(r->metrics.count("critic_loss"), 1u);
  }
  for (int i = 3; i < 5; ++i) {
    auto m = train(ts.sys(), a, values(ts.sys(), a, toy_group(rng, i)));
    EXPECT_EQ(m.count("critic_loss"), 1u) << "group " << i;
  }
  EXPECT_EQ(versions_[a.address()], (std::vector<uint64_t>{2, 3}));
  auto snap = ask<actor_state>(ts.sys(), a, snapshot_atom::value, (dir_ / "ck1").string());
  ASSERT_TRUE(snap) << ts.sys().render(snap.error());

  auto b = spawn(ts.sys(), 1e-3, 2);
  auto ok = ask<bool>(ts.sys(), b, restore_atom::value, (dir_ / "ck1").string(), *snap);
  ASSERT_TRUE(ok) << ts.sys().render(ok.error());
  ASSERT_TRUE(*ok);
  auto snap2 = ask<actor_state>(ts.sys(), b, snapshot_atom::value, (dir_ / "ck2").string());
  ASSERT_TRUE(snap2);
  EXPECT_EQ(snap->bytes, snap2->bytes);  // optimizer steps (4) and version (3)
  // Both the decoder and the head trained.
  EXPECT_NE(file_bytes(dir_ / "ck1" / "model" / "model.safetensors"),
            file_bytes(dir_ / "init" / "model.safetensors"));
  for (const char* f : {"model/config.json", "model/model.safetensors",
                        "model/value_head.safetensors", "optimizer.bin"}) {
    ASSERT_TRUE(fs::exists(dir_ / "ck1" / f)) << f;
    EXPECT_EQ(file_bytes(dir_ / "ck1" / f), file_bytes(dir_ / "ck2" / f)) << f;
  }

  // The values sit where they should, and the saved folder reproduces them.
  auto probe = toy_group(rng, 99, 2);
  auto va = values(ts.sys(), a, probe);
  for (const auto& s : va.samples) {
    auto by_hand = values_by_hand(dir_ / "ck1" / "model", s);
    for (size_t t = 0; t < s.values.size(); ++t) EXPECT_NEAR(s.values[t], by_hand[t], 1e-6) << t;
    EXPECT_NE(s.values[0], 0.0f);
  }
  // One more step in both: identical results (optimizer state too), and the same next version.
  auto next = toy_group(rng, 100);
  auto ma = train(ts.sys(), a, values(ts.sys(), a, next));
  auto mb = train(ts.sys(), b, values(ts.sys(), b, next));
  ASSERT_EQ(ma.count("critic_loss"), 1u);
  EXPECT_EQ(ma["critic_loss"], mb["critic_loss"]);
  EXPECT_EQ(ma["critic_grad_norm"], mb["critic_grad_norm"]);
  EXPECT_EQ(versions_[a.address()].back(), 4u);
  EXPECT_EQ(versions_[b.address()], (std::vector<uint64_t>{4}));
  auto after_a = values(ts.sys(), a, probe), after_b = values(ts.sys(), b, probe);
  for (size_t i = 0; i < probe.samples.size(); ++i)
    EXPECT_EQ(after_a.samples[i].values, after_b.samples[i].values);

  // A saved folder (decoder + value_head.safetensors) loads as the same critic.
  auto loaded = critic_core::load(dir_ / "ck1" / "model", at::kFloat, at::kCPU, {});
  auto lv = loaded->values(probe.samples);
  for (size_t i = 0; i < probe.samples.size(); ++i) EXPECT_EQ(lv[i], va.samples[i].values);
}

TEST_F(CriticKind, ChecksParamsAndPorts) {
  const auto* kind = registry_.find("critic");
  params_of<schema::CriticParams> p;
  auto problems = kind->check_params(*p.setup().params_struct);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].text().rfind("model: required", 0), 0u);
  p->setModel((dir_ / "init").string());
  p->setTrainBatch(0);
  p->setGamma(1.5);
  problems = kind->check_params(*p.setup().params_struct);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0].text(), "gamma: must be in [0, 1]");
  EXPECT_EQ(problems[1].text(), "trainBatch: must be at least 1");

  test_system ts(registry_);
  auto critic = spawn(ts.sys(), 1e-3, 1);
  auto r = ask<node_reply>(ts.sys(), critic, process_atom::value, std::string("batches"),
                           wrap(sample_group{}));
  ASSERT_FALSE(r);
  EXPECT_NE(ts.sys().render(r.error()).find("no input port 'batches'"), std::string::npos);
  // "train" is a learner's batch port: its groups come in `train` requests, never one by one.
  auto one = ask<node_reply>(ts.sys(), critic, process_atom::value, std::string("train"),
                             wrap(sample_group{}));
  ASSERT_FALSE(one);
  EXPECT_NE(ts.sys().render(one.error()).find("port 'train' takes the learner's batches"),
            std::string::npos);
  EXPECT_EQ(registry_.find("critic")->role, role::learner);
}

}  // namespace
}  // namespace milesrt::critic
