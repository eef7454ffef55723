// The reference kind as a real actor: its log-probs are decoder::score_sequences' of the same
// model (bitwise on the CPU in fp32, against the packed call and against one call per sample),
// at the configured temperature; params checks; a wrong port is an error.
#include "actors/reference/reference_kind.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "actors/lib/llm/tiny_model_testing.hpp"
#include "milesrt/reference.capnp.h"
#include "runtime/testing/kind_testing.hpp"

namespace milesrt::reference {
namespace {
using namespace milesrt::runtime;
using namespace milesrt::kind_testing;
using llm::sample_group;
using llm::sample_msg;
namespace fs = std::filesystem;

class ReferenceKind : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("milesrt-reference-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    llm::testing::tiny_model(7)->save(dir_);
    register_reference_kind(registry_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  kind_registry registry_;
};

sample_msg sample(std::vector<int64_t> prompt, std::vector<int64_t> output) {
  sample_msg s;
  s.prompt = std::move(prompt);
  s.output = std::move(output);
  s.reward = 1;
  return s;
}

TEST_F(ReferenceKind, LogprobsAreScoreSequencesBitwise) {
  test_system ts(registry_);
  params_of<schema::ReferenceParams> p;
  p->setModel(dir_.string());
  p->setTemperature(0.7);
  auto actor = registry_.find("reference")->spawn(ts.sys(), p.setup());

  sample_group g;
  g.group_id = 5;
  g.samples = {sample({1, 2, 3}, {4, 5, 6, 7}), sample({1, 9}, {10}), sample({8, 8, 8, 8, 8}, {}),
               sample({3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3},
                      {8, 4, 6, 2, 6, 4, 3, 3, 8, 3})};
  auto reply = ask<node_reply>(ts.sys(), actor, process_atom::value, std::string("groups"),
                               wrap(g, 42, 3, 4));
  ASSERT_TRUE(reply) << ts.sys().render(reply.error());
  ASSERT_EQ(reply->outputs.size(), 1u);
  EXPECT_EQ(reply->outputs[0].port, "groups");
  EXPECT_EQ(reply->outputs[0].item.origin, 42u);
  EXPECT_EQ(reply->outputs[0].item.min_version, 3u);
  EXPECT_EQ(reply->outputs[0].item.max_version, 4u);
  EXPECT_EQ(reply->metrics.count("ref_seconds"), 1u);
  const auto& out = reply->outputs[0].item.payload.get_as<sample_group>(0);
  ASSERT_EQ(out.samples.size(), g.samples.size());

  auto model = llm::decoder::load(dir_, at::kFloat, at::kCPU);
  std::vector<std::vector<int64_t>> packed;
  for (const auto& s : g.samples) {
    if (s.output.empty()) continue;
    auto full = s.prompt;
    full.insert(full.end(), s.output.begin(), s.output.end());
    packed.push_back(full);
  }
  auto packed_scores = model->score_sequences(packed, 0.7);
  size_t j = 0;
  for (size_t i = 0; i < g.samples.size(); ++i) {
    const auto& s = g.samples[i];
    const auto& got = out.samples[i].ref_logprobs;
    ASSERT_EQ(got.size(), s.output.size()) << "sample " << i;
    if (s.output.empty()) continue;
    // The same packed call, and the sequence alone (the training path is batch-invariant).
    auto alone = model->score_sequences({packed[j]}, 0.7)[0].logprobs;
    auto together = packed_scores[j].logprobs;
    const int64_t O = static_cast<int64_t>(s.output.size()), L = together.numel();
    for (int64_t t = 0; t < O; ++t) {
      EXPECT_EQ(got[t], together[L - O + t].item<float>()) << "sample " << i << " token " << t;
      EXPECT_EQ(got[t], alone[L - O + t].item<float>()) << "sample " << i << " token " << t;
      EXPECT_LT(got[t], 0.0f);
    }
    ++j;
  }
  // Temperature matters: at 1.0 the log-probs differ.
  auto t1 = model->score_sequences({packed[0]}, 1.0)[0].logprobs;
  EXPECT_NE(out.samples[0].ref_logprobs[0], t1[2].item<float>());
}

TEST_F(ReferenceKind, RejectsOtherPortsAndPayloads) {
  test_system ts(registry_);
  params_of<schema::ReferenceParams> p;
  p->setModel(dir_.string());
  auto actor = registry_.find("reference")->spawn(ts.sys(), p.setup());
  sample_group g;
  g.samples = {sample({1}, {2})};
  auto r1 = ask<node_reply>(ts.sys(), actor, process_atom::value, std::string("scored"), wrap(g));
  ASSERT_FALSE(r1);
  EXPECT_NE(ts.sys().render(r1.error()).find("no input port 'scored'"), std::string::npos);
  auto r2 = ask<node_reply>(ts.sys(), actor, process_atom::value, std::string("groups"),
                            wrap(std::string("x")));
  ASSERT_FALSE(r2);
  EXPECT_NE(ts.sys().render(r2.error()).find("expects a sample_group"), std::string::npos);
  g.samples = {sample({}, {2})};
  auto r3 = ask<node_reply>(ts.sys(), actor, process_atom::value, std::string("groups"), wrap(g));
  ASSERT_FALSE(r3);
  EXPECT_NE(ts.sys().render(r3.error()).find("no prompt token"), std::string::npos);
}

TEST_F(ReferenceKind, ChecksParams) {
  const auto* kind = registry_.find("reference");
  params_of<schema::ReferenceParams> p;
  auto problems = kind->check_params(*p.setup().params_struct);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].text().rfind("model: required", 0), 0u);
  p->setModel("m");
  problems = kind->check_params(*p.setup().params_struct);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].text(), "model: 'm' is not a folder (a Hugging Face model folder)");
  p->setModel(dir_.string());
  p->setTemperature(0);
  problems = kind->check_params(*p.setup().params_struct);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].text(), "temperature: must be > 0");
}

}  // namespace
}  // namespace milesrt::reference
