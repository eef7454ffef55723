// End to end on the GPU: graphs/grpo_sync.capnp with the trainer and the rollout engine on CUDA in
// bf16 (the training path's flash attention, kernels and one-pass AdamW; the engine reading the
// trainer's own weights) runs 5 GRPO steps of the tiny arithmetic setup: finite losses and gradient
// norms, the version advancing each step, the trainer's log-probs of the sampled tokens close to
// the engine's, each phase's peak GPU memory reported, and the weights changed. Skips where no GPU
// is visible.

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "actors/lib/llm/model.hpp"
#include "kernels/device.hpp"
#include "test/support/arith_setup.hpp"

namespace {
using namespace milesrt::testing;

struct gpu_run {
  fs::path dir;
  std::vector<nlohmann::json> steps;
};

/// graphs/grpo_sync.capnp on CUDA bf16 over the tiny arithmetic setup in `setup`, `extra` set too.
gpu_run run_sync(const fs::path& setup, const std::string& name, const std::string& extra) {
  gpu_run out;
  out.dir = scratch(name);
  const std::string s = setup.string();
  auto r = run_milesrt(
      "run graphs/grpo_sync.capnp --set run.steps=5 --set run.batchSize=8 --set "
      "trainer.evalInterval=0"
      " --set trainer.device=cuda --set trainer.dtype=bf16 --set rollout.device=cuda"
      " --set rollout.dtype=bf16 --run-dir '" +
          out.dir.string() + "' --quiet --set run.maxOverSampling=0 --set trainer.model=" + s +
          "/model --set trainer.evalData=" + s +
          "/heldout.jsonl --set trainer.exportDir=" + (out.dir / "export").string() +
          " --set rollout.model=" + s + "/model --set data.path=" + s + "/rl.jsonl " + extra,
      name + "-run");
  EXPECT_EQ(r.status, 0) << r.err;
  std::istringstream in(slurp(out.dir / "metrics.jsonl"));
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.steps.push_back(nlohmann::json::parse(line));
  return out;
}

fs::path tiny_setup() {
  fs::path setup = scratch("grpo-gpu-setup");
  EXPECT_EQ(make_arith_setup(setup), 0);
  return setup;
}

TEST(GrpoGpu, FiveSyncStepsOnCudaBf16LearnSomethingAndAgreeWithTheEngine) {
  if (milesrt::kernels::cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  const fs::path setup = tiny_setup();
  auto run = run_sync(setup, "grpo-gpu", "");
  const auto& steps = run.steps;
  ASSERT_EQ(steps.size(), 5u);
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto& m = steps[i]["metrics"];
    EXPECT_EQ(steps[i]["version"].get<int>(), int(i) + 1);
    EXPECT_TRUE(std::isfinite(m["loss"].get<double>())) << m.dump();
    EXPECT_TRUE(std::isfinite(m["grad_norm"].get<double>()));
    EXPECT_GT(m["grad_norm"].get<double>(), 0.0);
    EXPECT_EQ(m["skipped_steps"].get<double>(), 0.0);
    // Peak GPU memory of each phase (issue 18): the trainer's step and the rollout that fed it.
    EXPECT_GT(m["train_gpu_memory_peak_gib"].get<double>(), 0.0) << m.dump();
    EXPECT_GT(m["rollout_gpu_memory_peak_gib"].get<double>(), 0.0) << m.dump();
    // bf16 on the GPU: the training forward (varlen flash attention, the training kernels) and the
    // engine's serving forward round differently; the same weights keep them close.
    EXPECT_LT(m["train_rollout_logprob_abs_diff"].get<double>(), 0.02) << m.dump();
    EXPECT_LT(m["train_rollout_logprob_abs_diff_max"].get<double>(), 0.25) << m.dump();
    std::cout << "step " << i + 1 << ": loss " << m["loss"] << ", |train - rollout| mean "
              << m["train_rollout_logprob_abs_diff"] << " max "
              << m["train_rollout_logprob_abs_diff_max"] << ", peak GiB train "
              << m["train_gpu_memory_peak_gib"] << " rollout " << m["rollout_gpu_memory_peak_gib"]
              << "\n";
  }
  // The exported weights are not the ones the run started from (both read as fp32; the start
  // rounded to bf16 as the trainer held it).
  auto before = milesrt::llm::decoder::load(setup / "model", at::kFloat, at::kCPU);
  auto after = milesrt::llm::decoder::load(run.dir / "export", at::kFloat, at::kCPU);
  const auto start = before->params().buffer().to(at::kBFloat16).to(at::kFloat);
  const double moved = (after->params().buffer() - start).abs().max().item<double>();
  std::cout << "largest weight change over 5 steps: " << moved << "\n";
  EXPECT_GT(moved, 0.0);
}

// Colocated memory (issue 14): with rollout.releaseKvWhenIdle the engine gives its KV pool (half
// the free GPU memory by default) back between rollout phases, so the trainer's step peaks that
// much lower; the next phase takes it back and captures its decode graphs again, and the run is
// the same GRPO run (versions, finite losses, engine and trainer agreeing).
TEST(GrpoGpu, ReleasingTheKvPoolBetweenPhasesLowersTheTrainersPeak) {
  if (milesrt::kernels::cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  const fs::path setup = tiny_setup();
  auto held = run_sync(setup, "grpo-gpu-held", "");
  auto released = run_sync(setup, "grpo-gpu-released", "--set rollout.releaseKvWhenIdle=true");
  ASSERT_EQ(held.steps.size(), 5u);
  ASSERT_EQ(released.steps.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    const auto& h = held.steps[i]["metrics"];
    const auto& r = released.steps[i]["metrics"];
    EXPECT_EQ(released.steps[i]["version"].get<int>(), int(i) + 1);
    EXPECT_TRUE(std::isfinite(r["loss"].get<double>())) << r.dump();
    EXPECT_LT(r["train_rollout_logprob_abs_diff"].get<double>(), 0.02) << r.dump();
    const double kept = h["train_gpu_memory_peak_gib"].get<double>();
    const double freed = r["train_gpu_memory_peak_gib"].get<double>();
    // The pool is tens of GiB on an H200; the tiny model's step needs well under 1 GiB.
    EXPECT_LT(freed, kept - 1.0) << "held " << h.dump() << "\nreleased " << r.dump();
    // Every phase after the first takes the pool back (the first finds it held).
    if (i > 0) {
      EXPECT_GE(r.value("rollout_kv_retake_seconds", -1.0), 0.0) << r.dump();
    }
    std::cout << "step " << i + 1 << ": trainer peak GiB " << kept << " with the pool held, "
              << freed << " released; retake " << r.value("rollout_kv_retake_seconds", -1.0)
              << " s\n";
  }
}

// The true on-policy mode on the GPU: 5 GRPO steps of a head-size-128 model (the mode's kernels),
// dense and Qwen3-MoE (4 experts, 2 a token), report a train/rollout log-prob difference of exactly
// 0 at every step (the trainer fails the step on any difference in the mode).
void expect_true_on_policy(const std::string& name, const std::string& model_args) {
  const fs::path setup = scratch(name + "-setup");
  ASSERT_EQ(make_arith_setup(setup, 64, 64, 8, model_args), 0);
  auto run =
      run_sync(setup, name, "--set trainer.trueOnPolicy=true --set rollout.trueOnPolicy=true");
  ASSERT_EQ(run.steps.size(), 5u);
  for (size_t i = 0; i < run.steps.size(); ++i) {
    const auto& m = run.steps[i]["metrics"];
    EXPECT_EQ(m["train_rollout_logprob_abs_diff_max"].get<double>(), 0.0) << m.dump();
    EXPECT_EQ(m["train_rollout_logprob_abs_diff"].get<double>(), 0.0) << m.dump();
    EXPECT_TRUE(std::isfinite(m["loss"].get<double>())) << m.dump();
    std::cout << name << " step " << i + 1 << ": |train - rollout| max "
              << m["train_rollout_logprob_abs_diff_max"] << ", loss " << m["loss"] << "\n";
  }
}

TEST(GrpoGpu, TrueOnPolicyStepsAgreeBitForBitDense) {
  if (milesrt::kernels::cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  expect_true_on_policy("grpo-gpu-top", "--hidden 256 --layers 2 --heads 2 --kv-heads 1");
}

TEST(GrpoGpu, TrueOnPolicyStepsAgreeBitForBitMoe) {
  if (milesrt::kernels::cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  expect_true_on_policy("grpo-gpu-top-moe",
                        "--hidden 256 --layers 2 --heads 2 --kv-heads 1 --experts 4");
}

}  // namespace
