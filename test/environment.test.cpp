// End to end: graphs/agent_env.capnp (the environment kind running calculator episodes against
// the real rollout, GRPO on them) and the plugin environment's graph
// (examples/custom_environment/grpo_guess.capnp) a few steps each, through the real milesrt
// executable, on a tiny calculator-agent setup made by milesrt_agent_calc_make. The trainer's
// log-probs of the sampled tokens equal the engine's bit for bit (sync, colocated): a mask that
// let a tool's or the template's tokens into the comparison would break that, since the
// environment's tokens carry log-prob 0 from the engine.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test/support.hpp"
#include "test/support/metrics_log.hpp"

namespace {
using namespace milesrt::testing;

/// The tiny setup (operands 10..20, a 32-wide model), made once per test binary.
const fs::path& setup_dir() {
  static fs::path dir = [] {
    fs::path d = scratch("agent-calc-setup");
    const std::string cmd = std::string("'") + MILESRT_AGENT_CALC_MAKE + "' --out '" + d.string() +
                            "' --min-operand 10 --max-operand 20 --sft-size 32 --rl-size 64 "
                            "--heldout 4 --hidden 32 --heads 2 > /dev/null";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    return d;
  }();
  return dir;
}

/// --set overrides that point a graph at the tiny setup.
std::string sets() {
  const std::string s = setup_dir().string();
  return " --set trainer.model=" + s + "/model --set rollout.model=" + s +
         "/model --set env.model=" + s + "/model --set data.path=" + s + "/rl.jsonl";
}

std::string paths(const fs::path& run) {
  return " --run-dir '" + run.string() + "' --quiet --set run.maxOverSampling=0" + sets();
}

TEST(EnvironmentGraphs, AgentEnvTrainsOnCalculatorEpisodes) {
  fs::path run = scratch("agent-env");
  const std::string s = setup_dir().string();
  auto r = run_milesrt(
      "run graphs/agent_env.capnp --set run.steps=3 --set run.batchSize=2 "
      "--set env.samplesPerPrompt=4 --set env.evalInterval=2 --set filter.dynamicSampling=false "
      "--set env.evalData=" +
          s + "/heldout.jsonl --set trainer.exportDir=" + (run / "export").string() + paths(run),
      "agent-env-run");
  ASSERT_EQ(r.status, 0) << r.err;
  auto steps = steps_of(run);
  ASSERT_EQ(steps.size(), 3u);
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto& m = steps[i]["metrics"];
    EXPECT_EQ(steps[i]["version"].get<int>(), int(i) + 1);
    EXPECT_EQ(m["train_rollout_logprob_abs_diff_max"].get<double>(), 0.0) << m.dump();
    EXPECT_DOUBLE_EQ(m["env_ended_done"].get<double>() + m["env_ended_turns"].get<double>() +
                         m["env_ended_tokens"].get<double>() + m["env_ended_time"].get<double>() +
                         m["env_ended_render"].get<double>(),
                     1.0);
    EXPECT_TRUE(m.contains("env_tool_call_rate"));
    EXPECT_EQ(m["env_episodes_total"].get<double>() > 0, true);
  }
  // Evaluated under version 0 (step 1) and version 2 (step 3), with and without the tool.
  for (size_t i : {0u, 2u}) {
    EXPECT_TRUE(steps[i]["metrics"].contains("eval_env_success")) << i;
    EXPECT_TRUE(steps[i]["metrics"].contains("eval_env_alt_success")) << i;
  }
  EXPECT_FALSE(steps[1]["metrics"].contains("eval_env_success"));
  EXPECT_TRUE(fs::exists(run / "export" / "model.safetensors"));
}

TEST(EnvironmentGraphs, ThePluginEnvironmentTrainsInAGraph) {
  fs::path run = scratch("grpo-guess");
  auto r = run_milesrt(
      "run examples/custom_environment/grpo_guess.capnp --set run.steps=2 "
      "--set run.batchSize=2 --set env.samplesPerPrompt=2" +
          paths(run),
      "grpo-guess-run");
  ASSERT_EQ(r.status, 0) << r.err;
  auto steps = steps_of(run);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[1]["metrics"]["train_rollout_logprob_abs_diff_max"].get<double>(), 0.0);
  EXPECT_TRUE(steps[1]["metrics"].contains("env_ended_turns"));
}

TEST(EnvironmentGraphs, ValidationNamesAnUnknownEnvironmentAndBadOptions) {
  auto ok =
      run_milesrt("validate graphs/agent_env.capnp --set env.evalData=" + setup_dir().string() +
                      "/heldout.jsonl" + sets(),
                  "agent-env-validate-ok");
  EXPECT_EQ(ok.status, 0) << ok.err;
  auto r = run_milesrt("validate graphs/agent_env.capnp --set env.environment=chess" + sets(),
                       "agent-env-validate");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("'chess' is not one of: calculator, remote"), std::string::npos) << r.err;
  r = run_milesrt("validate graphs/agent_env.capnp --set 'env.options={\"tool\": 1}'" + sets(),
                  "agent-env-validate2");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("options.tool: expected true or false"), std::string::npos) << r.err;
}

}  // namespace
