// The arithmetic example's on-policy distillation (graphs/opd.capnp, label slow): the default setup
// (milesrt_arith_make), SFT to its plateau (graphs/sft.capnp, the student), 100 GRPO steps
// (graphs/grpo_sync.capnp, the teacher), then 100 steps of on-policy distillation with no reward;
// the student's best held-out accuracy must come within 5 points of the teacher's
// (docs/benchmarks.md gives the measured curve).

#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "test/support.hpp"

namespace {
using namespace milesrt::testing;

nlohmann::json summary(const fs::path& run) {
  return nlohmann::json::parse(slurp(run / "summary.json"));
}
double best(const fs::path& run) {
  return summary(run)["last_metrics"]["eval_best_accuracy"].get<double>();
}

TEST(OpdLearns, TheStudentComesWithinFivePointsOfTheTeacher) {
  const fs::path root = scratch("opd-learn");
  const std::string setup = (root / "setup").string();
  const std::string make =
      std::string("'") + MILESRT_ARITH_MAKE + "' --out '" + setup + "' > /dev/null";
  ASSERT_EQ(std::system(make.c_str()), 0);
  const std::string sft_model = (root / "sft_model").string();
  const std::string grpo_model = (root / "grpo_model").string();
  auto sft =
      run_milesrt("run graphs/sft.capnp --quiet --run-dir '" + (root / "sft").string() +
                      "' --set data.path=" + setup + "/sft.jsonl --set trainer.model=" + setup +
                      "/model --set trainer.evalData=" + setup +
                      "/heldout.jsonl --set trainer.exportDir=" + sft_model,
                  "opd-learn-sft");
  ASSERT_EQ(sft.status, 0) << sft.err;
  const std::string rl = " --set data.path=" + setup + "/rl.jsonl --set trainer.evalData=" + setup +
                         "/heldout.jsonl --set rollout.model=" + sft_model +
                         " --set trainer.model=" + sft_model;
  auto grpo =
      run_milesrt("run graphs/grpo_sync.capnp --quiet --run-dir '" + (root / "grpo").string() +
                      "' --set trainer.exportDir=" + grpo_model + rl,
                  "opd-learn-grpo");
  ASSERT_EQ(grpo.status, 0) << grpo.err;
  auto opd = run_milesrt("run graphs/opd.capnp --quiet --run-dir '" + (root / "opd").string() +
                             "' --set trainer.exportDir=" + (root / "opd_model").string() +
                             " --set teacher.model=" + grpo_model +
                             " --set teacher.student=" + sft_model + rl,
                         "opd-learn-opd");
  ASSERT_EQ(opd.status, 0) << opd.err;
  const double student = best(root / "sft"), teacher = best(root / "grpo");
  const double distilled = best(root / "opd");
  std::printf(
      "OPD: student %.1f%% after SFT -> %.1f%% (best held-out in 100 steps), teacher %.1f%%\n",
      student * 100, distilled * 100, teacher * 100);
  EXPECT_GT(teacher - student, 0.1) << "the teacher is no better than the student";
  EXPECT_LE((teacher - distilled) * 100, 5.0) << summary(root / "opd").dump();
}

}  // namespace
