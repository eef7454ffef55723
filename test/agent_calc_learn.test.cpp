// The calculator-agent example learning (label slow): the default setup (milesrt_agent_calc_make),
// the SFT warm start (examples/agent_calc/sft.capnp), then GRPO on calculator episodes
// (graphs/agent_env.capnp); the held-out success with the tool must gain at least 20 points over
// the SFT start, the trained model must call the tool in at least half of the held-out episodes,
// and the same tasks without the tool must stay far below (the tool is what helps). The figures
// are printed for docs/environments.md.

#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "test/support.hpp"

namespace {
using namespace milesrt::testing;

/// The metrics of the steps that evaluated (eval_env_success), in order.
std::vector<nlohmann::json> evaluations(const fs::path& run) {
  std::vector<nlohmann::json> out;
  std::istringstream in(slurp(run / "metrics.jsonl"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line);
    if (j["metrics"].contains("eval_env_success")) out.push_back(j);
  }
  return out;
}

TEST(AgentCalcLearns, TheToolIsLearnedAndHelps) {
  const fs::path root = scratch("agent-calc-learn");
  const std::string setup = (root / "setup").string();
  const std::string make =
      std::string("'") + MILESRT_AGENT_CALC_MAKE + "' --out '" + setup + "' > /dev/null";
  ASSERT_EQ(std::system(make.c_str()), 0);
  const std::string model = (root / "sft_model").string();
  auto sft = run_milesrt("run examples/agent_calc/sft.capnp --quiet --run-dir '" +
                             (root / "sft").string() + "' --set data.path=" + setup +
                             "/sft.jsonl --set trainer.model=" + setup +
                             "/model --set trainer.exportDir=" + model,
                         "agent-calc-sft");
  ASSERT_EQ(sft.status, 0) << sft.err;
  auto grpo = run_milesrt(
      "run graphs/agent_env.capnp --quiet --set run.maxOverSampling=0 --run-dir '" +
          (root / "grpo").string() + "' --set data.path=" + setup +
          "/rl.jsonl --set env.evalData=" + setup + "/heldout.jsonl --set env.model=" + model +
          " --set rollout.model=" + model + " --set trainer.model=" + model +
          " --set trainer.exportDir=" + (root / "grpo_model").string(),
      "agent-calc-grpo");
  ASSERT_EQ(grpo.status, 0) << grpo.err;
  auto evals = evaluations(root / "grpo");
  ASSERT_GE(evals.size(), 2u);
  const auto& first = evals.front()["metrics"];
  const auto& last = evals.back()["metrics"];
  const double before = first["eval_env_success"], after = last["eval_env_success"];
  std::printf(
      "held-out success %.3f -> %.3f (version %d), tool-call rate %.3f -> %.3f, "
      "without the tool %.3f -> %.3f\n",
      before, after, evals.back()["version"].get<int>() - 1,
      first["eval_env_tool_call_rate"].get<double>(), last["eval_env_tool_call_rate"].get<double>(),
      first["eval_env_alt_success"].get<double>(), last["eval_env_alt_success"].get<double>());
  EXPECT_GE(after - before, 0.20);
  EXPECT_GE(last["eval_env_tool_call_rate"].get<double>(), 0.5);
  EXPECT_LT(last["eval_env_alt_success"].get<double>(), after - 0.2);
}

}  // namespace
