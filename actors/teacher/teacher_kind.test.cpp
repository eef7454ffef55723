// The teacher kind as a real actor: a local teacher's log-probs are an independent forward's (each
// sequence alone, a plain full-vocabulary log-softmax of the head's logits) and land in
// teacher_logprobs, never in ref_logprobs; a remote teacher, over HTTP through the protocol's own
// server side, gives the local teacher's log-probs within 1e-6; a teacher whose tokenizer is not
// the student's refuses to start (and fails validation), naming the first difference.
#include "actors/teacher/teacher_kind.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "actors/lib/llm/messages.hpp"
#include "actors/lib/llm/teacher_protocol.hpp"
#include "actors/lib/llm/tiny_model_testing.hpp"
#include "actors/lib/llm/tokenizer_fingerprint.hpp"
#include "milesrt/teacher.capnp.h"
#include "runtime/http/http_server.hpp"
#include "runtime/testing/kind_testing.hpp"

namespace milesrt::teacher {
namespace {
using namespace milesrt::runtime;
using namespace milesrt::kind_testing;
using llm::sample_group;
using llm::sample_msg;
namespace fs = std::filesystem;
using nlohmann::json;

/// A model folder: tiny_model(seed) with a real tokenizer (the tokenizer oracle's Qwen3 files).
void make_folder(const fs::path& dir, uint64_t seed) {
  fs::create_directories(dir);
  llm::testing::tiny_model(seed)->save(dir);
  const fs::path tok = fs::path(MILESRT_TOKENIZER_DATA) / "qwen3";
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(tok / f, dir / f, fs::copy_options::overwrite_existing);
}

json read(const fs::path& p) { return json::parse(std::ifstream(p)); }
void write(const fs::path& p, const json& j) { std::ofstream(p) << j.dump(); }

class TeacherKind : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("milesrt-teacher-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    make_folder(teacher_dir(), 7);
    make_folder(student_dir(), 3);
    register_teacher_kind(registry_);
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path teacher_dir() const { return root_ / "teacher"; }
  fs::path student_dir() const { return root_ / "student"; }

  caf::expected<sample_group> score(test_system& ts, params_of<schema::TeacherParams>& p,
                                    const sample_group& g, const std::string& port) {
    auto actor = registry_.find("teacher")->spawn(ts.sys(), p.setup());
    auto reply = ask<node_reply>(ts.sys(), actor, process_atom::value, port, wrap(g, 42, 3, 4));
    if (!reply) return reply.error();
    EXPECT_EQ(reply->outputs.size(), 1u);
    EXPECT_EQ(reply->outputs[0].port, "groups");
    EXPECT_EQ(reply->outputs[0].item.origin, 42u);
    EXPECT_EQ(reply->metrics.count("teacher_seconds"), 1u);
    return reply->outputs[0].item.payload.get_as<sample_group>(0);
  }

  fs::path root_;
  kind_registry registry_;
};

sample_msg sample(std::vector<int64_t> prompt, std::vector<int64_t> output) {
  sample_msg s;
  s.prompt = std::move(prompt);
  s.output = std::move(output);
  return s;
}

sample_group group() {
  sample_group g;
  g.group_id = 5;
  g.samples = {sample({1, 2, 3}, {4, 5, 6, 7}), sample({1, 9}, {10}), sample({8, 8, 8}, {}),
               sample({3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3},
                      {8, 4, 6, 2, 6, 4, 3, 3, 8, 3})};
  return g;
}

TEST_F(TeacherKind, LocalLogprobsAreAnIndependentForwards) {
  test_system ts(registry_);
  params_of<schema::TeacherParams> p;
  p->setModel(teacher_dir().string());
  p->setStudent(student_dir().string());
  p->setTemperature(0.7);
  const auto g = group();
  auto out = score(ts, p, g, "samples");
  ASSERT_TRUE(out) << ts.sys().render(out.error());
  auto model = llm::decoder::load(teacher_dir(), at::kFloat, at::kCPU);
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < g.samples.size(); ++i) {
    const auto& s = g.samples[i];
    const auto& got = out->samples[i].teacher_logprobs;
    EXPECT_TRUE(out->samples[i].ref_logprobs.empty())
        << "the reference's field is not the teacher's";
    ASSERT_EQ(got.size(), s.output.size()) << "sample " << i;
    if (s.output.empty()) continue;
    auto full = s.prompt;
    full.insert(full.end(), s.output.begin(), s.output.end());
    // The sequence alone, its logits in double over the full vocabulary.
    const auto hidden = model->forward({llm::segment{full}}, {}).hidden.to(at::kDouble);
    const auto logits = at::matmul(hidden, model->lm_head().to(at::kDouble).t()) / 0.7;
    const auto lp = at::log_softmax(logits, -1);
    const int64_t L = static_cast<int64_t>(full.size()), O = static_cast<int64_t>(s.output.size());
    for (int64_t t = 0; t < O; ++t) {
      const int64_t row = L - O + t - 1;
      EXPECT_NEAR(got[t], lp[row][full[row + 1]].item<double>(), 1e-5) << "sample " << i;
    }
  }
}

TEST_F(TeacherKind, ARemoteTeacherGivesTheLocalLogprobs) {
  // The protocol's server side (what examples/teacher_server serves) over real HTTP.
  auto model = llm::decoder::load(teacher_dir(), at::kFloat, at::kCPU);
  const auto fingerprint = llm::to_json(llm::fingerprint_of(teacher_dir()));
  int requests = 0;
  http_server server(0);
  server.route(http_method::post, "/v1/logprobs", [&](const http_request& r) {
    ++requests;
    return http_response(200, "application/json",
                         llm::answer_teacher_request(*model, r.body, 4096));
  });
  server.route(http_method::post, "/v1/tokenizer", [&](const http_request&) {
    return http_response(200, "application/json", fingerprint);
  });
  server.start();

  test_system ts(registry_);
  const auto g = group();
  params_of<schema::TeacherParams> local;
  local->setModel(teacher_dir().string());
  local->setStudent(student_dir().string());
  params_of<schema::TeacherParams> remote;
  remote->setUrl("http://127.0.0.1:" + std::to_string(server.port()) + "/");
  remote->setStudent(student_dir().string());
  auto a = score(ts, local, g, "groups");
  auto b = score(ts, remote, g, "groups");
  ASSERT_TRUE(a) << ts.sys().render(a.error());
  ASSERT_TRUE(b) << ts.sys().render(b.error());
  EXPECT_EQ(requests, 1);  // one batched request per group
  for (size_t i = 0; i < g.samples.size(); ++i) {
    ASSERT_EQ(a->samples[i].teacher_logprobs.size(), b->samples[i].teacher_logprobs.size());
    for (size_t t = 0; t < a->samples[i].teacher_logprobs.size(); ++t)
      EXPECT_NEAR(a->samples[i].teacher_logprobs[t], b->samples[i].teacher_logprobs[t], 1e-6);
  }
}

TEST_F(TeacherKind, RefusesATokenizerThatIsNotTheStudents) {
  // One vocabulary entry renamed in the student's tokenizer.json.
  auto tj = read(student_dir() / "tokenizer.json");
  const int64_t id = tj["model"]["vocab"]["#"].get<int64_t>();
  tj["model"]["vocab"].erase("#");
  tj["model"]["vocab"]["#renamed"] = id;
  write(student_dir() / "tokenizer.json", tj);
  test_system ts(registry_);
  params_of<schema::TeacherParams> p;
  p->setModel(teacher_dir().string());
  p->setStudent(student_dir().string());
  const std::string want = "the teacher's tokenizer differs from the student's (" +
                           student_dir().string() + "): token " + std::to_string(id) +
                           " is '#' in the teacher's, '#renamed' in the student's";
  try {
    registry_.find("teacher")->spawn(ts.sys(), p.setup());
    FAIL() << "a teacher with another tokenizer started";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
  auto problems = registry_.find("teacher")->check_params(*p.setup().params_struct);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].text(), "student: " + want);

  // The same vocabulary with another end-of-sequence token.
  make_folder(student_dir(), 3);
  auto cfg = read(student_dir() / "tokenizer_config.json");
  cfg["eos_token"] = "<|endoftext|>";
  write(student_dir() / "tokenizer_config.json", cfg);
  problems = registry_.find("teacher")->check_params(*p.setup().params_struct);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].text().find(
                "eos_token is '" +
                read(teacher_dir() / "tokenizer_config.json")["eos_token"].get<std::string>() +
                "' in the teacher's, '<|endoftext|>' in the student's"),
            std::string::npos)
      << problems[0].text();
  // The same tokenizer: no problem.
  make_folder(student_dir(), 3);
  EXPECT_TRUE(registry_.find("teacher")->check_params(*p.setup().params_struct).empty());
}

TEST_F(TeacherKind, ChecksParams) {
  const auto* kind = registry_.find("teacher");
  params_of<schema::TeacherParams> p;
  auto problems = kind->check_params(*p.setup().params_struct);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0].text().rfind("model: required", 0), 0u);
  EXPECT_EQ(problems[1].text().rfind("student: required", 0), 0u);
  p->setModel(teacher_dir().string());
  p->setUrl("http://127.0.0.1:1");
  p->setStudent(student_dir().string());
  problems = kind->check_params(*p.setup().params_struct);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].text(), "model: a local teacher (model) or a remote one (url), not both");
  p->setModel("");
  p->setUrl("https://x");
  p->setTemperature(0);
  problems = kind->check_params(*p.setup().params_struct);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0].text(), "url: 'https://x' is not an http:// URL");
  EXPECT_EQ(problems[1].text(), "temperature: must be > 0");
}

}  // namespace
}  // namespace milesrt::teacher
