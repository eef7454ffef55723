// End to end: graphs/bench_rl_sync.capnp and bench_rl_async.capnp (the GRPO loop benchmark that
// .ci/gpu-rl runs on a GPU) a few steps each on the CPU, with the tiny arithmetic model, prompts of
// token ids and tiny sizes set from the command line. The per-step figures the benchmark reports
// (docs/metrics.md: active_seconds, idle_seconds, train_tokens) are there and consistent, and
// test/peers/rl_summary.py summarises them, and refuses figures that are not consistent.

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "test/support/arith_setup.hpp"
#include "test/support/metrics_log.hpp"

namespace {
using namespace milesrt::testing;

const fs::path& setup_dir() { return shared_arith_setup("bench-rl-setup"); }

/// Prompts of random token ids of the arithmetic vocabulary (16 ids), as hf_rl_loop.py writes them.
fs::path prompts_file() {
  static fs::path file = [] {
    fs::path f = scratch("bench-rl-prompts") / "prompts.jsonl";
    std::ofstream out(f);
    std::mt19937 rng(1);
    for (int i = 0; i < 16; ++i) {
      nlohmann::json ids = nlohmann::json::array();
      for (int t = 0; t < 6; ++t) ids.push_back(int(rng() % 16));
      out << nlohmann::json{{"prompt_ids", ids}}.dump() << "\n";
    }
    return f;
  }();
  return file;
}

/// The graph on the CPU with tiny sizes.
std::string tiny(const std::string& graph, const fs::path& run) {
  const std::string m = (setup_dir() / "model").string();
  return "run graphs/" + graph + " --quiet --set run.maxOverSampling=0 --run-dir '" + run.string() +
         "'" + " --set rollout.model=" + m + " --set trainer.model=" + m +
         " --set rollout.device=cpu --set rollout.dtype=fp32 --set trainer.device=cpu"
         " --set trainer.dtype=fp32 --set rollout.maxNewTokens=6 --set rollout.samplesPerPrompt=4"
         " --set rollout.stepTokens=512 --set rollout.kvBlocks=256 --set data.path=" +
         prompts_file().string() + " --set run.steps=3 --set run.batchSize=4";
}

/// test/peers/rl_summary.py on `run` with `args`.
result summarise(const fs::path& run, const std::string& args, const std::string& tag) {
  fs::path d = scratch(tag);
  std::string cmd = "'" + std::string(MILESRT_PYTHON) + "' '" + source_dir() +
                    "/test/peers/rl_summary.py' '" + run.string() + "' " + args + " >'" +
                    (d / "out").string() + "' 2>'" + (d / "err").string() + "'";
  int raw = std::system(cmd.c_str());
  result r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = slurp(d / "out");
  r.err = slurp(d / "err");
  return r;
}

void check_steps(const std::vector<nlohmann::json>& steps, bool sync) {
  ASSERT_EQ(steps.size(), 3u);
  for (const auto& s : steps) {
    SCOPED_TRACE("step " + s["step"].dump());
    const double secs = s["seconds"].get<double>();
    const auto& active = s["active_seconds"];
    ASSERT_TRUE(active.contains("rollout")) << active.dump();
    ASSERT_TRUE(active.contains("trainer")) << active.dump();
    double parts = 0;
    for (const char* a : {"rollout", "trainer", "publisher"}) {
      const double x = active.value(a, 0.0);
      EXPECT_GE(x, 0.0) << a;
      EXPECT_LE(x, secs + 1e-9) << a;
      parts += x;
    }
    EXPECT_GT(active["rollout"].get<double>(), 0.0);
    EXPECT_GT(active["trainer"].get<double>(), 0.0);
    const double idle = s["idle_seconds"].get<double>();
    EXPECT_GE(idle, 0.0);
    // In lockstep the engine, the trainer and the publisher take turns: their times and the
    // driver's own add up to at most the step.
    if (sync) {
      EXPECT_LE(parts + idle, secs + 1e-6) << s.dump();
    }
    EXPECT_GT(s["metrics"]["train_tokens"].get<double>(), 0.0);
    EXPECT_TRUE(s["metrics"].contains("reward_mean"));
  }
  // The publication after step k is handed over during step k + 1.
  EXPECT_GT(steps[1]["active_seconds"].value("publisher", 0.0), 0.0) << steps[1].dump();
}

TEST(BenchRl, SyncAndAsyncReportConsistentPhaseTimesAndTheSummaryReadsThem) {
  for (const std::string schedule : {"sync", "async"}) {
    SCOPED_TRACE(schedule);
    // As shipped (CUDA, bf16, the GPU sizes), only the paths set: the graph validates here too.
    const std::string m = (setup_dir() / "model").string();
    auto v = run_milesrt("validate graphs/bench_rl_" + schedule +
                             ".capnp --set data.path=" + prompts_file().string() +
                             " --set rollout.model=" + m + " --set trainer.model=" + m,
                         "bench-rl-validate-" + schedule);
    EXPECT_EQ(v.status, 0) << v.err;
    EXPECT_NE(v.out.find(": ok (6 actors, 6 edges, "), std::string::npos) << v.out;
    const fs::path run = scratch("bench-rl-" + schedule);
    auto r = run_milesrt(tiny("bench_rl_" + schedule + ".capnp", run), "bench-rl-run-" + schedule);
    ASSERT_EQ(r.status, 0) << r.err;
    auto steps = steps_of(run);
    check_steps(steps, schedule == "sync");
    auto sum =
        summarise(run, "--warmup 1 --check" + std::string(schedule == "sync" ? " --disjoint" : ""),
                  "bench-rl-summary-" + schedule);
    ASSERT_EQ(sum.status, 0) << sum.out << sum.err;
    auto j = nlohmann::json::parse(sum.out);
    EXPECT_EQ(j["timed_steps"].get<int>(), 2);
    for (const char* f : {"step_s", "rollout_s", "train_s", "publish_s", "overhead_s",
                          "train_tokens", "train_tokens_per_s", "steps_per_min"}) {
      ASSERT_TRUE(j.contains(f)) << f << " missing: " << sum.out;
      EXPECT_GE(j[f].get<double>(), 0.0) << f;
    }
    EXPECT_GT(j["train_tokens_per_s"].get<double>(), 0.0);
    EXPECT_GT(j["steps_per_min"].get<double>(), 0.0);
    for (const char* f : {"rollout_s", "train_s", "publish_s", "overhead_s"})
      EXPECT_LE(j[f].get<double>(), j["step_s"].get<double>() + 1e-9) << f;
  }
}

TEST(BenchRl, TheSummaryRefusesInconsistentFigures) {
  const fs::path run = scratch("bench-rl-doctored");
  const std::string good = R"({"step": 1, "seconds": 2.0, "idle_seconds": 0.1,
      "active_seconds": {"rollout": 1.0, "trainer": 0.5, "publisher": 0.1},
      "metrics": {"train_tokens": 100}})";
  auto write = [&](const std::string& second) {
    std::string one = good;
    one.erase(std::remove(one.begin(), one.end(), '\n'), one.end());
    std::ofstream(run / "metrics.jsonl") << one << "\n" << second << "\n";
  };
  write(
      R"({"step": 2, "seconds": 2.0, "idle_seconds": 0.1, "active_seconds": {"rollout": 1.0, "trainer": 0.5}, "metrics": {"train_tokens": 100}})");
  EXPECT_EQ(summarise(run, "--warmup 0 --check --disjoint", "bench-rl-good").status, 0);
  // A part longer than the step, and a negative overhead.
  write(
      R"({"step": 2, "seconds": 2.0, "idle_seconds": -0.5, "active_seconds": {"rollout": 2.5, "trainer": 0.5}, "metrics": {"train_tokens": 100}})");
  auto bad = summarise(run, "--warmup 0 --check", "bench-rl-bad");
  EXPECT_EQ(bad.status, 1) << bad.out;
  EXPECT_NE(bad.err.find("step 2: rollout_s 2.500000 > step_s 2.000000"), std::string::npos)
      << bad.err;
  EXPECT_NE(bad.err.find("step 2: overhead_s -0.5 < 0"), std::string::npos) << bad.err;
  // Parts that overlap: fine for async, not in lockstep.
  write(
      R"({"step": 2, "seconds": 2.0, "idle_seconds": 0.1, "active_seconds": {"rollout": 1.5, "trainer": 1.5}, "metrics": {"train_tokens": 100}})");
  EXPECT_EQ(summarise(run, "--warmup 0 --check", "bench-rl-overlap").status, 0);
  auto lockstep = summarise(run, "--warmup 0 --check --disjoint", "bench-rl-lockstep");
  EXPECT_EQ(lockstep.status, 1);
  EXPECT_NE(lockstep.err.find("rollout + train + publish + overhead 3.100000 > step_s"),
            std::string::npos)
      << lockstep.err;
  // No tokens trained.
  write(
      R"({"step": 2, "seconds": 2.0, "idle_seconds": 0.1, "active_seconds": {"rollout": 1.0, "trainer": 0.5}, "metrics": {}})");
  EXPECT_EQ(summarise(run, "--warmup 0 --check", "bench-rl-notokens").status, 1);
}

}  // namespace
