// End to end: the graphs users start from (graphs/sft.capnp, grpo_sync.capnp, grpo_async.capnp,
// ppo.capnp) run a few steps on a tiny arithmetic setup made by milesrt_arith_make, through the
// real milesrt executable; versions, staleness, the train/rollout log-prob agreement and a bitwise
// sync resume are checked from metrics.jsonl and the exported weights.

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "test/support/arith_setup.hpp"
#include "test/support/metrics_log.hpp"

namespace {
using namespace milesrt::testing;

/// The tiny setup, made once per test binary.
const fs::path& setup_dir() { return shared_arith_setup("grpo-setup"); }

/// --set overrides that point a graph at the tiny setup.
std::string paths(const fs::path& run, bool rl) {
  const std::string s = setup_dir().string();
  std::string a = " --run-dir '" + run.string() +
                  "' --quiet --set run.maxOverSampling=0 --set trainer.model=" + s + "/model" +
                  " --set trainer.evalData=" + s +
                  "/heldout.jsonl --set trainer.exportDir=" + (run / "export").string();
  if (rl)
    a += " --set rollout.model=" + s + "/model --set data.path=" + s + "/rl.jsonl";
  else
    a += " --set data.path=" + s + "/sft.jsonl";
  return a;
}

TEST(GrpoGraphs, SyncThreeStepsVersionsStalenessAndExactLogprobs) {
  fs::path run = scratch("grpo-sync");
  auto r = run_milesrt(
      "run graphs/grpo_sync.capnp --set run.steps=3 --set run.batchSize=4 "
      "--set trainer.evalInterval=3" +
          paths(run, true),
      "grpo-sync-run");
  ASSERT_EQ(r.status, 0) << r.err;
  auto steps = steps_of(run);
  ASSERT_EQ(steps.size(), 3u);
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto& s = steps[i];
    EXPECT_EQ(s["step"].get<int>(), int(i) + 1);
    EXPECT_EQ(s["version"].get<int>(), int(i) + 1);
    // Lockstep: every item of step k was generated under version k-1 (staleness 0).
    ASSERT_EQ(s["staleness"].size(), 1u) << s["staleness"].dump();
    EXPECT_EQ(s["staleness"]["0"].get<int>(), 4);
    // The colocated engine reads the trainer's own weights: the trainer's log-probs of the
    // sampled tokens equal the engine's bit for bit.
    EXPECT_EQ(s["metrics"]["train_rollout_logprob_abs_diff_max"].get<double>(), 0.0);
    EXPECT_TRUE(s["metrics"].contains("reward_mean"));
    // The publication after step k is measured while step k+1 runs.
    if (i > 0) {
      EXPECT_TRUE(s["metrics"].contains("publish_seconds"));
    }
  }
  EXPECT_TRUE(steps[2]["metrics"].contains("eval_accuracy"));
  EXPECT_TRUE(fs::exists(run / "export" / "model.safetensors"));
  EXPECT_TRUE(fs::exists(run / "export" / "tokenizer.json"));
  EXPECT_TRUE(fs::exists(run / "plot.svg"));
}

TEST(GrpoGraphs, AsyncThreeStepsKeepTheStalenessBound) {
  fs::path run = scratch("grpo-async");
  auto r = run_milesrt(
      "run graphs/grpo_async.capnp --set run.steps=3 --set run.batchSize=4 "
      "--set trainer.evalInterval=0" +
          paths(run, true),
      "grpo-async-run");
  ASSERT_EQ(r.status, 0) << r.err;
  auto steps = steps_of(run);
  ASSERT_EQ(steps.size(), 3u);
  int stale_items = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto& s = steps[i];
    EXPECT_EQ(s["version"].get<int>(), int(i) + 1);
    int items = 0;
    for (auto& [k, v] : s["staleness"].items()) {
      EXPECT_LE(std::stoi(k), 1) << "maxStaleness is 1: " << s["staleness"].dump();
      items += v.get<int>();
      if (std::stoi(k) > 0) stale_items += v.get<int>();
    }
    EXPECT_EQ(items, 4);
    EXPECT_EQ(s["counters"]["stale_violations"].get<int>(), 0);
  }
  // Without evaluation the trainer exports its last version.
  EXPECT_TRUE(fs::exists(run / "export" / "model.safetensors"));
  (void)stale_items;
}

/// Every step of `run` from `first` on keeps the async bound (maxStaleness 1) with no violation.
void expect_bound_from(const fs::path& run, size_t first, const std::string& what) {
  auto steps = steps_of(run);
  ASSERT_EQ(steps.size(), 8u) << what;
  for (size_t i = first; i < steps.size(); ++i) {
    for (auto& [k, v] : steps[i]["staleness"].items()) {
      EXPECT_LE(std::stoi(k), 1) << what << ", step " << i + 1 << ": "
                                 << steps[i]["staleness"].dump();
    }
    EXPECT_EQ(steps[i]["counters"]["stale_violations"].get<int>(), 0) << what << ", step " << i + 1;
  }
}

// An async run resumed from a checkpoint admits nothing until the engine holds the restored
// version: at random checkpoint steps, resumed directly and under --supervise, every step after the
// resume keeps the bound (a resumed engine that sampled with the model folder's weights gave items
// of staleness 5 and counted stale violations).
TEST(GrpoGraphs, AsyncResumesAtRandomStepsKeepTheStalenessBound) {
  std::mt19937 rng(20261205);
  for (int trial = 0; trial < 4; ++trial) {
    const int at = 1 + int(rng() % 5);  // the checkpoint to resume from: step 1 to 5
    const bool supervised = trial % 2 == 1;
    const std::string what = "checkpoint at step " + std::to_string(at) +
                             (supervised ? ", resumed under --supervise" : ", resumed");
    fs::path run = scratch("async-resume-" + std::to_string(trial));
    const std::string common =
        "run graphs/grpo_async.capnp --set run.batchSize=4 --set trainer.evalInterval=0 "
        "--set trainer.lrSchedule=constant --set run.checkpointInterval=" +
        std::to_string(at);
    auto a = run_milesrt(common + " --set run.steps=" + std::to_string(at) + paths(run, true),
                         "async-resume-a");
    ASSERT_EQ(a.status, 0) << what << ": " << a.err;
    auto b = run_milesrt(common + " --set run.steps=8 --resume '" + run.string() + "'" +
                             (supervised ? " --supervise" : "") + paths(run, true),
                         "async-resume-b");
    ASSERT_EQ(b.status, 0) << what << ": " << b.err;
    expect_bound_from(run, size_t(at), what);
  }
}

// examples/custom_reward's graph: the plugin's length_reward kind scores the groups of a GRPO run.
TEST(GrpoGraphs, CustomRewardPluginScoresAGrpoRun) {
  fs::path run = scratch("grpo-length");
  auto r = run_milesrt(
      "run examples/custom_reward/grpo_length.capnp --set run.steps=2 --set run.batchSize=4" +
          paths(run, true),
      "grpo-length-run");
  ASSERT_EQ(r.status, 0) << r.err;
  auto steps = steps_of(run);
  ASSERT_EQ(steps.size(), 2u);
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i]["version"].get<int>(), int(i) + 1);
    // length_reward: scale 2 at exactly 3 tokens, 0 at 6 or more; maxNewTokens is 4.
    const double reward = steps[i]["metrics"]["reward_mean"].get<double>();
    EXPECT_GT(reward, 0.0);
    EXPECT_LE(reward, 2.0);
    EXPECT_TRUE(steps[i]["metrics"].contains("reward_std"));
  }
}

// A checkpoint that cannot be written (here a file-size limit, RLIMIT_FSIZE via prlimit: the
// trainer's optimizer state is larger than it) ends the run with an error naming the step, the
// file and the reason; the last complete checkpoint stays complete, and a later resume goes on
// from it.
TEST(GrpoGraphs, AFailedCheckpointWriteKeepsTheLastCompleteOne) {
  fs::path run = scratch("grpo-disk-fault");
  const std::string common =
      " --set run.batchSize=4 --set run.checkpointInterval=1 --set trainer.evalInterval=0" +
      paths(run, true);
  auto first = run_milesrt("run graphs/grpo_sync.capnp --set run.steps=2" + common, "disk-fault-1");
  ASSERT_EQ(first.status, 0) << first.err;
  const fs::path step2 = run / "checkpoints" / "step-2";
  ASSERT_TRUE(fs::exists(step2 / "manifest.json"));
  const std::string manifest = slurp(step2 / "manifest.json");
  const auto optimizer_bytes = fs::file_size(step2 / "actors" / "trainer-0" / "optimizer.bin");
  const auto model_bytes =
      fs::file_size(step2 / "actors" / "trainer-0" / "model" / "model.safetensors");
  ASSERT_GT(optimizer_bytes, model_bytes + 1000);
  // Files up to the model's size can be written, the optimizer state cannot.
  const std::string limit =
      "prlimit --fsize=" + std::to_string((model_bytes + optimizer_bytes) / 2) + " -- ";
  const fs::path log = scratch("disk-fault-2") / "err.txt";
  const std::string cmd = "cd '" + source_dir() + "' && " + limit + "'" + exe() +
                          "' run graphs/grpo_sync.capnp --resume '" + run.string() +
                          "' --set run.steps=4" + common + " > /dev/null 2> '" + log.string() + "'";
  const int status = std::system(cmd.c_str());
  const std::string err = slurp(log);
  EXPECT_NE(status, 0) << err;
  EXPECT_NE(err.find("checkpointing step 3"), std::string::npos) << err;
  EXPECT_NE(err.find("optimizer.bin: File too large"), std::string::npos) << err;
  // step-2 is untouched and still the newest complete checkpoint; step 3 never became one.
  EXPECT_EQ(slurp(step2 / "manifest.json"), manifest);
  EXPECT_EQ(fs::file_size(step2 / "actors" / "trainer-0" / "optimizer.bin"), optimizer_bytes);
  EXPECT_FALSE(fs::exists(run / "checkpoints" / "step-3" / "manifest.json"));
  // Without the limit the run resumes from step 2 and finishes.
  auto last = run_milesrt(
      "run graphs/grpo_sync.capnp --resume '" + run.string() + "' --set run.steps=4" + common,
      "disk-fault-3");
  ASSERT_EQ(last.status, 0) << last.err;
  EXPECT_TRUE(fs::exists(run / "checkpoints" / "step-4" / "manifest.json"));
  EXPECT_EQ(steps_of(run).back()["version"].get<int>(), 4);
}

// examples/custom_loss's graph: the trainer takes the plugin's vanilla_pg policy loss by name.
TEST(GrpoGraphs, CustomLossPluginTrainsAGrpoRun) {
  fs::path run = scratch("grpo-vanilla-pg");
  auto r = run_milesrt(
      "run examples/custom_loss/grpo_vanilla_pg.capnp --set run.steps=2 --set run.batchSize=4" +
          paths(run, true),
      "grpo-vanilla-pg-run");
  ASSERT_EQ(r.status, 0) << r.err;
  auto steps = steps_of(run);
  ASSERT_EQ(steps.size(), 2u);
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto& m = steps[i]["metrics"];
    EXPECT_EQ(steps[i]["version"].get<int>(), int(i) + 1);
    EXPECT_GT(m["grad_norm"].get<double>(), 0.0);
    // vanilla_pg has no ratio clip: the ppo surrogate's clip fraction is not reported.
    EXPECT_FALSE(m.contains("pg_clipfrac")) << m.dump();
  }
  // A loss no registry knows is refused, the plugin's among the names listed.
  auto bad = run_milesrt(
      "validate examples/custom_loss/grpo_vanilla_pg.capnp --set trainer.policyLoss=nope",
      "vpg-bad");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("vanilla_pg"), std::string::npos) << bad.err;
}

TEST(GrpoGraphs, CustomBufferPolicyPluginTrainsAGrpoRun) {
  // examples/custom_buffer_policy's graph: the plugin's freshest policy picks the batches of an
  // async run (nothing past the staleness bound is trained), and a name no registry knows is
  // refused with the plugin's policy among the names listed.
  fs::path run = scratch("grpo-freshest");
  auto r = run_milesrt(
      "run examples/custom_buffer_policy/grpo_freshest.capnp --set run.steps=3 --set "
      "run.batchSize=4 "
      "--set trainer.evalInterval=0" +
          paths(run, true),
      "grpo-freshest-run");
  ASSERT_EQ(r.status, 0) << r.err;
  auto steps = steps_of(run);
  ASSERT_EQ(steps.size(), 3u);
  for (const auto& s : steps) {
    for (auto& [k, v] : s["staleness"].items()) EXPECT_LE(std::stoi(k), 1) << s["staleness"].dump();
    EXPECT_TRUE(s["metrics"].contains("buffer_served_staleness_mean")) << s.dump();
  }
  auto bad = run_milesrt(
      "validate examples/custom_buffer_policy/grpo_freshest.capnp --set buffer.policy=nope",
      "freshest-bad");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("params.trajectoryBuffer.policy: 'nope' is not one of: fifo, freshest, "
                         "priority, staleness"),
            std::string::npos)
      << bad.err;
}

TEST(GrpoGraphs, SftThreeSteps) {
  fs::path run = scratch("sft");
  auto r = run_milesrt(
      "run graphs/sft.capnp --set run.steps=3 --set run.batchSize=8 "
      "--set trainer.evalInterval=1 --set trainer.evalPatience=0" +
          paths(run, false),
      "sft-run");
  ASSERT_EQ(r.status, 0) << r.err;
  auto steps = steps_of(run);
  ASSERT_EQ(steps.size(), 3u);
  for (const auto& s : steps) {
    EXPECT_GT(s["metrics"]["sft_loss"].get<double>(), 0.0);
    EXPECT_TRUE(s["metrics"].contains("eval_accuracy"));
  }
  EXPECT_LT(steps[2]["metrics"]["sft_loss"].get<double>(),
            steps[0]["metrics"]["sft_loss"].get<double>());
}

TEST(GrpoGraphs, SyncResumeIsBitwise) {
  // Four steps straight, against two steps, a checkpoint, and a resumed run to four. The learning
  // rate is held constant: the graph's cosine schedule spans run.steps, which the split run
  // changes from 2 to 4 on resume (a different schedule by design).
  fs::path whole = scratch("resume-whole"), split = scratch("resume-split");
  const std::string common =
      "run graphs/grpo_sync.capnp --set run.batchSize=4 --set trainer.evalInterval=0 "
      "--set run.checkpointInterval=2 --set trainer.lrSchedule=constant";
  auto a = run_milesrt(common + " --set run.steps=4" + paths(whole, true), "resume-a");
  ASSERT_EQ(a.status, 0) << a.err;
  auto b = run_milesrt(common + " --set run.steps=2" + paths(split, true), "resume-b");
  ASSERT_EQ(b.status, 0) << b.err;
  auto c = run_milesrt(
      common + " --set run.steps=4 --resume '" + split.string() + "'" + paths(split, true),
      "resume-c");
  ASSERT_EQ(c.status, 0) << c.err;
  auto sa = steps_of(whole), sc = steps_of(split);
  ASSERT_EQ(sa.size(), 4u);
  ASSERT_EQ(sc.size(), 4u);
  for (int i = 2; i < 4; ++i) {
    for (const char* m : {"loss", "grad_norm", "reward_mean", "train_rollout_logprob_abs_diff"}) {
      EXPECT_EQ(sa[i]["metrics"][m].get<double>(), sc[i]["metrics"][m].get<double>())
          << "step " << i + 1 << " " << m;
    }
  }
  EXPECT_EQ(slurp(whole / "export" / "model.safetensors"),
            slurp(split / "export" / "model.safetensors"))
      << "the resumed run's weights differ from the uninterrupted run's";
}

TEST(GrpoGraphs, MixTakesSeventyThirtyFromTwoDatasets) {
  // graphs/grpo_mix.capnp: the arithmetic RL prompts at weight 0.7 and the SFT set's problems at
  // 0.3. Without dynamic sampling every admitted group is trained: each batch of 10 holds 7 and 3.
  fs::path run = scratch("grpo-mix");
  const std::string s = setup_dir().string();
  auto r = run_milesrt(
      "run graphs/grpo_mix.capnp --set run.steps=3 --set run.batchSize=10 "
      "--set trainer.evalInterval=0 --set filter.dynamicSampling=false --run-dir '" +
          run.string() + "' --quiet --set run.maxOverSampling=0 --set trainer.model=" + s +
          "/model --set rollout.model=" + s +
          "/model --set trainer.exportDir=" + (run / "export").string() +
          " --set trainer.evalData=" + s + "/heldout.jsonl --set arith.path=" + s +
          "/rl.jsonl --set sft_prompts.path=" + s + "/sft.jsonl",
      "grpo-mix-run");
  ASSERT_EQ(r.status, 0) << r.err;
  auto steps = steps_of(run);
  ASSERT_EQ(steps.size(), 3u);
  for (const auto& st : steps) {
    ASSERT_TRUE(st.contains("sources")) << st.dump();
    EXPECT_EQ(st["sources"], (nlohmann::json{{"arith", 7}, {"sft_prompts", 3}})) << st.dump();
    EXPECT_EQ(st["counters"]["admitted"].get<int>() % 10, 0);
  }
}

const fs::path& sft_model_dir();

/// The tiny setup with the policy its 200-step SFT model (rewards vary, so every loss is not zero).
std::string sft_paths(const fs::path& run) {
  const std::string m = sft_model_dir().string();
  return paths(run, true) + " --set rollout.model=" + m + " --set trainer.model=" + m;
}

/// graphs/grpo_buffer.capnp in lockstep: a copy whose schedule is `sync`, the rest as it is.
fs::path sync_buffer_graph() {
  static fs::path file = [] {
    std::string g = slurp(fs::path(source_dir()) / "graphs" / "grpo_buffer.capnp");
    const std::string async = "schedule = (async = (maxStaleness = 1)),";
    g.replace(g.find(async), async.size(), "schedule = (sync = void),");
    fs::path f = scratch("grpo-buffer-graph") / "grpo_buffer_sync.capnp";
    std::ofstream(f) << g;
    return f;
  }();
  return file;
}

TEST(GrpoGraphs, AFifoBufferActorTrainsAsTheDriversQueueAndResumesBitwise) {
  // grpo_sync.capnp keeps the learner's groups in the driver; the buffer graph in lockstep with a
  // fifo policy and dynamic sampling off holds them in the trajectory_buffer actor: the same
  // losses and weights, step for step. Then two steps, a checkpoint (the buffer's state in it) and
  // a resume to four give the uninterrupted run's figures and weights.
  fs::path queue = scratch("buffer-queue"), whole = scratch("buffer-whole"),
           split = scratch("buffer-split");
  const std::string common =
      " --set run.batchSize=4 --set trainer.evalInterval=0 --set run.checkpointInterval=2 "
      "--set trainer.lrSchedule=constant --set trainer.tis=false";
  auto q = run_milesrt(
      "run graphs/grpo_sync.capnp --set filter.dynamicSampling=false --set run.steps=4" + common +
          sft_paths(queue),
      "buffer-q");
  ASSERT_EQ(q.status, 0) << q.err;
  const std::string buffered =
      "run '" + sync_buffer_graph().string() + "' --set buffer.policy=fifo" + common;
  auto a = run_milesrt(buffered + " --set run.steps=4" + sft_paths(whole), "buffer-a");
  ASSERT_EQ(a.status, 0) << a.err;
  auto b = run_milesrt(buffered + " --set run.steps=2" + sft_paths(split), "buffer-b");
  ASSERT_EQ(b.status, 0) << b.err;
  ASSERT_TRUE(fs::exists(split / "checkpoints" / "step-2" / "buffer-0.state"));
  auto c = run_milesrt(
      buffered + " --set run.steps=4 --resume '" + split.string() + "'" + sft_paths(split),
      "buffer-c");
  ASSERT_EQ(c.status, 0) << c.err;
  auto sq = steps_of(queue), sa = steps_of(whole), sc = steps_of(split);
  ASSERT_EQ(sq.size(), 4u);
  ASSERT_EQ(sa.size(), 4u);
  ASSERT_EQ(sc.size(), 4u);
  double learned = 0;
  for (int i = 0; i < 4; ++i) {
    for (const char* m : {"loss", "grad_norm", "reward_mean"}) {
      EXPECT_EQ(sq[i]["metrics"][m].get<double>(), sa[i]["metrics"][m].get<double>())
          << "step " << i + 1 << " " << m;
      if (i >= 2) {
        EXPECT_EQ(sa[i]["metrics"][m].get<double>(), sc[i]["metrics"][m].get<double>())
            << "step " << i + 1 << " " << m;
      }
    }
    EXPECT_EQ(sa[i]["origins"], sq[i]["origins"]) << "step " << i + 1;
    // Lockstep: the buffer hands out all it holds each step.
    EXPECT_EQ(sa[i]["metrics"]["buffer_size"].get<double>(), 0.0) << sa[i].dump();
    learned += sa[i]["metrics"]["grad_norm"].get<double>();
  }
  EXPECT_GT(learned, 0.0) << "no step learned anything: the comparison would prove nothing";
  EXPECT_EQ(slurp(queue / "export" / "model.safetensors"),
            slurp(whole / "export" / "model.safetensors"))
      << "the buffered run's weights differ from the driver's queue's";
  EXPECT_EQ(slurp(whole / "export" / "model.safetensors"),
            slurp(split / "export" / "model.safetensors"))
      << "the resumed buffered run's weights differ from the uninterrupted run's";
}

TEST(GrpoGraphs, APriorityBufferServesTheLargestSpreadWithinTheStalenessBound) {
  // graphs/grpo_buffer.capnp as shipped (async, maxStaleness 1, priority): every batch within the
  // bound, every group the buffer served past it or dropped counted, and the served groups' mean
  // reward spread reported each step; a checkpoint at step 2 resumes to step 4.
  fs::path run = scratch("buffer-priority");
  const std::string common =
      "run graphs/grpo_buffer.capnp --set run.batchSize=4 --set trainer.evalInterval=0 "
      "--set run.checkpointInterval=2";
  auto r = run_milesrt(common + " --set run.steps=2" + sft_paths(run), "buffer-p1");
  ASSERT_EQ(r.status, 0) << r.err;
  auto resumed = run_milesrt(
      common + " --set run.steps=4 --resume '" + run.string() + "'" + sft_paths(run), "buffer-p2");
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  auto steps = steps_of(run);
  ASSERT_EQ(steps.size(), 4u);
  double spread = 0;
  for (const auto& s : steps) {
    int items = 0;
    for (auto& [k, v] : s["staleness"].items()) {
      EXPECT_LE(std::stoi(k), 1) << s["staleness"].dump();
      items += v.get<int>();
    }
    EXPECT_EQ(items, 4);
    EXPECT_EQ(s["counters"]["stale_violations"].get<int>(), 0);
    ASSERT_TRUE(s["metrics"].contains("buffer_served_spread_mean")) << s.dump();
    spread += s["metrics"]["buffer_served_spread_mean"].get<double>();
    EXPECT_EQ(s["metrics"]["buffer_stale_served"].get<double>(), 0.0);
    const auto& c = s["counters"];
    EXPECT_EQ(c["admitted"].get<int>(), c["accepted"].get<int>() + c["dropped_stale"].get<int>() +
                                            c["filtered"].get<int>() + c["in_flight"].get<int>())
        << c.dump();
  }
  EXPECT_GT(spread, 0.0)
      << "from the SFT model some groups' rewards differ, and those are served first";
}

/// The tiny setup's model after 200 SFT steps (half the held-out sums right), made once: from the
/// random model every sample's reward is 0, and PPO would have nothing to learn.
const fs::path& sft_model_dir() {
  static fs::path dir = [] {
    fs::path run = scratch("ppo-sft");
    auto r = run_milesrt(
        "run graphs/sft.capnp --set run.steps=200 --set run.batchSize=16 "
        "--set trainer.evalInterval=0" +
            paths(run, false),
        "ppo-sft-run");
    EXPECT_EQ(r.status, 0) << r.err;
    return run / "export";
  }();
  return dir;
}

/// graphs/ppo.capnp pointed at the tiny setup and its SFT model (the policy, the reference and the
/// critic start from it, as in the arithmetic example).
std::string ppo_paths(const fs::path& run) {
  const std::string m = sft_model_dir().string();
  return paths(run, true) + " --set rollout.model=" + m + " --set trainer.model=" + m +
         " --set reference.model=" + m + " --set critic.model=" + m;
}

TEST(GrpoGraphs, PpoTrainsThePolicyAndTheCriticAndResumesBitwise) {
  // graphs/ppo.capnp as shipped (reference -> critic values -> GAE -> PPO with a k3 KL, the critic
  // trained on the same groups), four steps straight, then two steps, a checkpoint and a resume
  // to four: both learners' figures and the policy's exported weights must be equal.
  fs::path whole = scratch("ppo-whole"), split = scratch("ppo-split");
  const std::string common =
      "run graphs/ppo.capnp --set run.batchSize=4 --set trainer.evalInterval=0 "
      "--set run.checkpointInterval=2 --set critic.trainBatch=4";
  auto a = run_milesrt(common + " --set run.steps=4" + ppo_paths(whole), "ppo-a");
  ASSERT_EQ(a.status, 0) << a.err;
  auto sa = steps_of(whole);
  ASSERT_EQ(sa.size(), 4u);
  for (size_t i = 0; i < sa.size(); ++i) {
    const auto& m = sa[i]["metrics"];
    EXPECT_EQ(sa[i]["version"].get<int>(), int(i) + 1);
    EXPECT_EQ(sa[i]["staleness"]["0"].get<int>(), 4) << sa[i]["staleness"].dump();
    // The critic trains once per step (trainBatch = batchSize groups reach critic.train).
    ASSERT_TRUE(m.contains("critic_loss")) << m.dump();
    EXPECT_TRUE(std::isfinite(m["critic_loss"].get<double>()));
    ASSERT_TRUE(m.contains("kl_loss")) << m.dump();
    EXPECT_GE(m["kl_loss"].get<double>(), 0.0);  // k3 is never negative
    ASSERT_TRUE(m.contains("critic_value_mean")) << m.dump();
  }
  // The SFT model gets some sums right: the rewards carry signal for both learners.
  EXPECT_GT(sa[0]["metrics"]["reward_mean"].get<double>(), 0.0);
  // The policy's trainer and its engine start from the same weights and then share them.
  for (const auto& st : sa)
    EXPECT_EQ(st["metrics"]["train_rollout_logprob_abs_diff_max"].get<double>(), 0.0);
  // The value head starts at zero: the first step's values are exactly 0 (advantages = rewards);
  // after the critic's steps they are not.
  EXPECT_EQ(sa[0]["metrics"]["critic_value_mean"].get<double>(), 0.0);
  EXPECT_NE(sa[3]["metrics"]["critic_value_mean"].get<double>(), 0.0);
  // Step 1's policy is the reference: no KL yet; by step 4 the policy has moved away from it.
  EXPECT_LT(sa[0]["metrics"]["kl_loss"].get<double>(), 1e-6);
  EXPECT_GT(sa[3]["metrics"]["kl_loss"].get<double>(), sa[0]["metrics"]["kl_loss"].get<double>());

  auto b = run_milesrt(common + " --set run.steps=2" + ppo_paths(split), "ppo-b");
  ASSERT_EQ(b.status, 0) << b.err;
  auto c = run_milesrt(
      common + " --set run.steps=4 --resume '" + split.string() + "'" + ppo_paths(split), "ppo-c");
  ASSERT_EQ(c.status, 0) << c.err;
  auto sc = steps_of(split);
  ASSERT_EQ(sc.size(), 4u);
  for (int i = 2; i < 4; ++i) {
    for (const char* m :
         {"loss", "grad_norm", "reward_mean", "kl_loss", "critic_loss", "critic_value_mean"}) {
      EXPECT_EQ(sa[i]["metrics"][m].get<double>(), sc[i]["metrics"][m].get<double>())
          << "step " << i + 1 << " " << m;
    }
  }
  EXPECT_EQ(slurp(whole / "export" / "model.safetensors"),
            slurp(split / "export" / "model.safetensors"))
      << "the resumed PPO run's policy differs from the uninterrupted run's";
}

TEST(GrpoGraphs, IpcFeedsAnEngineInAWorkerProcess) {
  // The rollout engine in a second process (`milesrt worker`), the trainer and the publisher in
  // the run's; each version crosses in shared memory and is checked by its hashes.
  fs::path run = scratch("grpo-ipc");
  const int port = 40000 + ::getpid() % 20000;
  auto r = start(
      "run graphs/grpo_sync.capnp --set publisher.transport=ipc --set rollout.placement=w1 "
      "--set run.steps=3 --set run.batchSize=4 --set trainer.evalInterval=0 --listen 127.0.0.1:" +
          std::to_string(port) + paths(run, true),
      "grpo-ipc-run");
  auto w =
      start("worker --connect 127.0.0.1:" + std::to_string(port) + " --name w1", "grpo-ipc-worker");
  auto done = r.wait(std::chrono::seconds(120));
  ASSERT_EQ(done.status, 0) << done.err << done.out;
  EXPECT_EQ(w.wait(std::chrono::seconds(30)).status, 0);
  auto steps = steps_of(run);
  ASSERT_EQ(steps.size(), 3u);
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i]["version"].get<int>(), int(i) + 1);
    // The engine in the other process holds the trainer's weights bit for bit.
    EXPECT_EQ(steps[i]["metrics"]["train_rollout_logprob_abs_diff_max"].get<double>(), 0.0);
    if (i > 0) {
      EXPECT_TRUE(steps[i]["metrics"].contains("publish_apply_seconds"));
    }
  }
}

TEST(Agreement, TrueOnPolicyHoldsOnTheCpuAndAMismatchFailsTheStep) {
  // Sync: every sample of step k is of the version the trainer holds, and the CPU paths agree bit
  // for bit: the mode holds at every step.
  fs::path run = scratch("top-sync");
  const std::string both = " --set trainer.trueOnPolicy=true --set rollout.trueOnPolicy=true";
  auto r = run_milesrt("run graphs/grpo_sync.capnp --set run.steps=3 --set run.batchSize=2" + both +
                           paths(run, true),
                       "top-sync-run");
  ASSERT_EQ(r.status, 0) << r.err;
  auto steps = steps_of(run);
  ASSERT_EQ(steps.size(), 3u);
  for (const auto& s : steps) {
    ASSERT_TRUE(s["metrics"].contains("train_rollout_logprob_abs_diff_max_held")) << s.dump();
    EXPECT_EQ(s["metrics"]["train_rollout_logprob_abs_diff_max_held"].get<double>(), 0.0);
    EXPECT_FALSE(s["metrics"].contains("logprob_diff_alarms"));  // no alarm in the mode
  }
  // An engine serving in bf16 beside a trainer in fp32 (a common choice): their log-probs differ
  // in the last bits, and in the mode that ends the first step with the difference named.
  fs::path bad = scratch("top-dtype");
  auto t = run_milesrt("run graphs/grpo_sync.capnp --set run.steps=2 --set run.batchSize=2" + both +
                           " --set rollout.dtype=bf16" + paths(bad, true),
                       "top-dtype-run");
  EXPECT_EQ(t.status, 1) << t.err;
  EXPECT_NE(t.err.find("trueOnPolicy: the trainer's log-probs of the tokens sampled under the "
                       "weights it holds (version 0) differ from the engine's by up to"),
            std::string::npos)
      << t.err;
  // Outside the mode the same mismatch raises the alarm: a warning line and the counters.
  fs::path warn = scratch("alarm-dtype");
  auto w = run_milesrt(
      "run graphs/grpo_sync.capnp --set run.steps=2 --set run.batchSize=2"
      " --set rollout.dtype=bf16 --set trainer.logprobDiffAlarm=0.001" +
          paths(warn, true),
      "alarm-dtype-run");
  ASSERT_EQ(w.status, 0) << w.err;
  EXPECT_NE(w.err.find("warn  [trainer step 1] the trainer's log-probs"), std::string::npos)
      << w.err;
  auto ws = steps_of(warn);
  ASSERT_EQ(ws.size(), 2u);
  EXPECT_EQ(ws[0]["metrics"]["logprob_diff_alarm"].get<double>(), 1.0);
  EXPECT_EQ(ws[1]["metrics"]["logprob_diff_alarms"].get<double>(), 2.0);
}

// The mode with a mixture of experts (the arithmetic model as Qwen3-MoE, 4 experts, 2 a token):
// the trainer's forward with the engine's routing replayed, or routing again itself, gives the
// engine's log-probs bit for bit at every step.
TEST(Agreement, TrueOnPolicyHoldsForAMoeModelWithAndWithoutRoutingReplay) {
  const fs::path setup = scratch("top-moe-setup");
  ASSERT_EQ(make_arith_setup(setup, 64, 64, 8, "--experts 4"), 0);
  const std::string s = setup.string();
  for (const char* replay : {"true", "false"}) {
    fs::path run = scratch(std::string("top-moe-") + replay);
    auto r = run_milesrt(
        "run graphs/grpo_sync.capnp --set run.steps=2 --set run.batchSize=2 --set "
        "trainer.evalInterval=0 --set trainer.trueOnPolicy=true --set rollout.trueOnPolicy=true "
        "--set trainer.routingReplay=" +
            std::string(replay) + " --run-dir '" + run.string() +
            "' --quiet --set run.maxOverSampling=0 --set trainer.model=" + s +
            "/model --set trainer.evalData=" + s +
            "/heldout.jsonl --set trainer.exportDir=" + (run / "export").string() +
            " --set rollout.model=" + s + "/model --set data.path=" + s + "/rl.jsonl",
        std::string("top-moe-run-") + replay);
    ASSERT_EQ(r.status, 0) << r.err;
    auto steps = steps_of(run);
    ASSERT_EQ(steps.size(), 2u);
    for (const auto& st : steps)
      EXPECT_EQ(st["metrics"]["train_rollout_logprob_abs_diff_max_held"].get<double>(), 0.0)
          << replay << ": " << st.dump();
  }
}

TEST(Agreement, TrueOnPolicyAndTemperatureAreSetAlike) {
  const std::string s = setup_dir().string();
  // Every path of the graph in the tiny setup, so that only the setting under test is wrong.
  const std::string models = " --set trainer.model=" + s + "/model --set rollout.model=" + s +
                             "/model --set data.path=" + s +
                             "/rl.jsonl --set trainer.evalData=" + s + "/heldout.jsonl";
  auto one = run_milesrt("validate graphs/grpo_sync.capnp --set trainer.trueOnPolicy=true" + models,
                         "top-one");
  EXPECT_EQ(one.status, 2);
  EXPECT_NE(one.err.find("trueOnPolicy"), std::string::npos) << one.err;
  EXPECT_NE(one.err.find("'rollout'"), std::string::npos) << one.err;
  auto cuda = run_milesrt(
      "validate graphs/grpo_sync.capnp --set trainer.trueOnPolicy=true "
      "--set rollout.trueOnPolicy=true --set rollout.device=cuda" +
          models,
      "top-cuda");
  EXPECT_EQ(cuda.status, 2);
  // fp32 weights: the mode's CUDA kernels are bf16 (or absent from a build without them).
  const bool says_why =
      cuda.err.find("params.rollout.trueOnPolicy: on cuda the mode needs dtype = bf16") !=
          std::string::npos ||
      cuda.err.find("params.rollout.trueOnPolicy: this build has no CUDA kernels") !=
          std::string::npos;
  EXPECT_TRUE(says_why) << cuda.err;
  auto fine = run_milesrt(
      "validate graphs/grpo_sync.capnp --set trainer.trueOnPolicy=true "
      "--set rollout.trueOnPolicy=true" +
          models,
      "top-fine");
  EXPECT_EQ(fine.status, 0) << fine.err;
  auto ranks = run_milesrt(
      "validate graphs/grpo_sync.capnp --set trainer.trueOnPolicy=true "
      "--set rollout.trueOnPolicy=true --set trainer.dataParallel=2" +
          models,
      "top-ranks");
  EXPECT_EQ(ranks.status, 2);
  EXPECT_NE(ranks.err.find("trueOnPolicy: not built with dataParallel > 1"), std::string::npos)
      << ranks.err;
  // The trainer and the reference take their log-probs at the engine's sampling temperature.
  auto temp = run_milesrt("validate graphs/grpo_sync.capnp --set trainer.temperature=0.5" + models,
                          "temp-differs");
  EXPECT_EQ(temp.status, 2);
  EXPECT_NE(temp.err.find("temperature"), std::string::npos) << temp.err;
  EXPECT_NE(temp.err.find("'rollout'"), std::string::npos) << temp.err;
  auto negative =
      run_milesrt("validate graphs/grpo_sync.capnp --set trainer.logprobDiffAlarm=-1" + models,
                  "alarm-negative");
  EXPECT_EQ(negative.status, 2);
  EXPECT_NE(negative.err.find("logprobDiffAlarm: must be >= 0"), std::string::npos) << negative.err;
}

}  // namespace
