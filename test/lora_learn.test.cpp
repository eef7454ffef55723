// The arithmetic example's GRPO stage with LoRA (graphs/grpo_lora.capnp, label slow): the default
// setup (milesrt_arith_make), SFT to its plateau (graphs/sft.capnp), then 100 GRPO steps that train
// rank-8 adapters only; the held-out accuracy must gain at least 20 points over the SFT plateau,
// the rule the main job applies to full fine-tuning (docs/main-job.md). The run's memory and
// publication figures are printed for docs/lora.md.

#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "test/support.hpp"

namespace {
using namespace milesrt::testing;

nlohmann::json summary(const fs::path& run) {
  return nlohmann::json::parse(slurp(run / "summary.json"));
}

TEST(LoraLearns, ArithmeticGainsTwentyPointsOverSft) {
  const fs::path root = scratch("lora-learn");
  const std::string setup = (root / "setup").string();
  const std::string make =
      std::string("'") + MILESRT_ARITH_MAKE + "' --out '" + setup + "' > /dev/null";
  ASSERT_EQ(std::system(make.c_str()), 0);
  auto sft =
      run_milesrt("run graphs/sft.capnp --quiet --run-dir '" + (root / "sft").string() +
                      "' --set data.path=" + setup + "/sft.jsonl --set trainer.model=" + setup +
                      "/model --set trainer.evalData=" + setup +
                      "/heldout.jsonl --set trainer.exportDir=" + (root / "sft_model").string(),
                  "lora-learn-sft");
  ASSERT_EQ(sft.status, 0) << sft.err;
  const double before = summary(root / "sft")["last_metrics"]["eval_best_accuracy"].get<double>();
  const std::string model = (root / "sft_model").string();
  auto grpo =
      run_milesrt("run graphs/grpo_lora.capnp --quiet --set run.maxOverSampling=0 --run-dir '" +
                      (root / "lora").string() + "' --set data.path=" + setup +
                      "/rl.jsonl --set trainer.model=" + model + " --set rollout.model=" + model +
                      " --set trainer.evalData=" + setup +
                      "/heldout.jsonl --set trainer.exportDir=" + (root / "lora_model").string(),
                  "lora-learn-grpo");
  ASSERT_EQ(grpo.status, 0) << grpo.err;
  const auto s = summary(root / "lora");
  const double after = s["last_metrics"]["eval_accuracy"].get<double>();
  std::printf("LoRA GRPO: held-out accuracy %.1f%% after SFT -> %.1f%% after GRPO (%+.1f points)\n",
              before * 100, after * 100, (after - before) * 100);
  EXPECT_GE((after - before) * 100, 20.0) << s.dump();
}

}  // namespace
