// Parity with the real reference: random models of each family made and saved by transformers
// (PyPI), loaded by milesrt, log-probs of packed sequences of mixed lengths (up to 310 tokens)
// compared; milesrt's saved checkpoints loaded back by transformers; `milesrt score` end to end.
#include <ATen/ATen.h>

#include <nlohmann/json.hpp>

#include "actors/lib/llm/model.hpp"
#include "test/support.hpp"

namespace {
using namespace milesrt::testing;
using milesrt::llm::decoder;

class Parity : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    dir_ = scratch("parity");
    std::string cmd = std::string("'") + MILESRT_PYTHON + "' '" + source_dir() +
                      "/test/oracle/llm_oracle.py' make '" + dir_.string() + "' > '" +
                      (dir_ / "make.log").string() + "' 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << slurp(dir_ / "make.log");
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  fs::path model_dir() const { return dir_ / GetParam(); }
  nlohmann::json reference() const {
    return nlohmann::json::parse(slurp(model_dir() / "reference.json"));
  }
  static fs::path dir_;
};
fs::path Parity::dir_;

TEST_P(Parity, LogProbsMatchTransformers) {
  auto model = decoder::load(model_dir(), at::kFloat, at::kCPU);
  auto ref = reference();
  std::vector<std::vector<int64_t>> seqs = ref["sequences"];
  auto scores = model->score_sequences(seqs, 1.0);  // all sequences in one packed pass
  double worst = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    std::vector<double> want = ref["logprobs"][s];
    ASSERT_EQ(scores[s].logprobs.numel(), int64_t(want.size()));
    for (size_t i = 0; i < want.size(); ++i) {
      worst = std::max(worst, std::abs(scores[s].logprobs[i].item<double>() - want[i]));
    }
  }
  EXPECT_LT(worst, 1e-4) << GetParam();
  std::cout << GetParam() << ": max |milesrt - transformers| = " << worst << "\n";
}

TEST_P(Parity, SavedCheckpointsLoadBackInTransformers) {
  auto model = decoder::load(model_dir(), at::kFloat, at::kCPU);
  auto saved = dir_ / ("saved-" + GetParam());
  // Small shards, so that the index is exercised too.
  model->save(saved, 40000);
  ASSERT_TRUE(fs::exists(saved / "model.safetensors.index.json"));
  std::string cmd = std::string("'") + MILESRT_PYTHON + "' '" + source_dir() +
                    "/test/oracle/llm_oracle.py' check '" + model_dir().string() + "' '" +
                    saved.string() + "' > '" + (saved / "check.json").string() + "' 2>'" +
                    (saved / "check.log").string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << slurp(saved / "check.log");
  auto result = nlohmann::json::parse(slurp(saved / "check.json"));
  EXPECT_EQ(result["max_abs_diff"].get<double>(), 0.0);
}

INSTANTIATE_TEST_SUITE_P(Families, Parity,
                         ::testing::Values("qwen3", "qwen2", "llama", "qwen3_moe"));

TEST(ScoreCommand, ScoresJsonLinesAndNamesBadLines) {
  auto dir = scratch("score");
  std::string make = std::string("'") + MILESRT_PYTHON + "' '" + source_dir() +
                     "/test/oracle/llm_oracle.py' make '" + dir.string() + "' > /dev/null 2>&1";
  ASSERT_EQ(std::system(make.c_str()), 0);
  auto ref = nlohmann::json::parse(slurp(dir / "qwen2" / "reference.json"));
  std::ofstream in(dir / "in.jsonl");
  in << nlohmann::json({{"ids", ref["sequences"][2]}}).dump() << "\n";
  in << "{not json\n";
  in << R"({"ids": [1, 2, 100000]})"
     << "\n";
  in << nlohmann::json({{"ids", ref["sequences"][3]}, {"temperature", 1.0}}).dump() << "\n";
  in.close();
  auto r = run_milesrt(
      "score --model '" + (dir / "qwen2").string() + "' < '" + (dir / "in.jsonl").string() + "'",
      "score-out");
  EXPECT_EQ(r.status, 2) << r.err;  // bad input lines
  std::vector<nlohmann::json> out;
  std::stringstream lines(r.out);
  for (std::string l; std::getline(lines, l);) out.push_back(nlohmann::json::parse(l));
  ASSERT_EQ(out.size(), 4u) << r.out;
  EXPECT_EQ(out[1]["error"],
            std::string("line 2: ") + out[1]["error"].get<std::string>().substr(8));
  EXPECT_NE(out[1]["error"].get<std::string>().find("line 2: "), std::string::npos);
  EXPECT_EQ(out[2]["error"], "line 3: 'ids[2]' must be an integer from 0 to 150, got 100000");
  for (int k : {0, 3}) {
    std::vector<double> got = out[k]["logprobs"], want = ref["logprobs"][k == 0 ? 2 : 3];
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4);
    EXPECT_EQ(out[k]["entropy"].size(), got.size());
  }
  auto missing = run_milesrt("score --model /nonexistent < /dev/null", "score-missing");
  EXPECT_EQ(missing.status, 2);
  EXPECT_EQ(missing.err,
            "milesrt score: error: /nonexistent: no such model folder (it needs "
            "config.json and safetensors weights)\n");
  fs::remove_all(dir);
}

}  // namespace
