// End to end: graphs/grpo_lora.capnp through the real milesrt executable on the tiny arithmetic
// setup: every step publishes the adapters alone and the engine's log-probs equal the trainer's
// bit for bit (colocated, and ipc into an engine in a worker process), the checkpoint holds the
// adapters and the base's hash, the async schedule runs, and validation names a bad lora field.
// LoraGraph.ArithmeticLearns (label slow) runs the whole arithmetic example's GRPO stage with
// LoRA and asserts the held-out gain.

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "test/support/arith_setup.hpp"
#include "test/support/metrics_log.hpp"

namespace {
using namespace milesrt::testing;

const fs::path& setup_dir() { return shared_arith_setup("lora-setup"); }

std::string paths(const fs::path& run) {
  const std::string s = setup_dir().string();
  return " --run-dir '" + run.string() +
         "' --quiet --set run.maxOverSampling=0 --set trainer.model=" + s +
         "/model --set rollout.model=" + s + "/model --set data.path=" + s +
         "/rl.jsonl --set trainer.evalData=" + s +
         "/heldout.jsonl --set trainer.exportDir=" + (run / "export").string();
}

/// Bytes of rank-8 fp32 adapters on every projection of the setup's model.
double adapter_bytes() {
  auto c = nlohmann::json::parse(slurp(setup_dir() / "model" / "config.json"));
  const double h = c["hidden_size"], i = c["intermediate_size"], layers = c["num_hidden_layers"];
  const double q = c["num_attention_heads"].get<double>() * c["head_dim"].get<double>();
  const double kv = c["num_key_value_heads"].get<double>() * c["head_dim"].get<double>();
  const double r = 8;
  const double per_layer = r * ((h + q) + 2 * (h + kv) + (q + h) + 2 * (h + i) + (i + h));
  return 4 * layers * per_layer;
}

TEST(LoraGraph, SyncStepsPublishOnlyAdaptersAndLogprobsAgreeBitwise) {
  fs::path run = scratch("lora-sync");
  auto r = run_milesrt(
      "run graphs/grpo_lora.capnp --set run.steps=3 --set run.batchSize=4 "
      "--set run.checkpointInterval=3 --set trainer.evalInterval=3" +
          paths(run),
      "lora-sync-run");
  ASSERT_EQ(r.status, 0) << r.err;
  auto steps = steps_of(run);
  ASSERT_EQ(steps.size(), 3u);
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto& m = steps[i]["metrics"];
    EXPECT_EQ(steps[i]["version"].get<int>(), int(i) + 1);
    // The colocated engine applies the trainer's adapters at run time: bit for bit.
    EXPECT_EQ(m["train_rollout_logprob_abs_diff_max"].get<double>(), 0.0) << "step " << i + 1;
    // What each publication moves is the adapters' flat buffer.
    if (i > 0) {  // the publication after step k is measured while step k+1 runs
      EXPECT_EQ(m["publish_bytes"].get<double>(), adapter_bytes());
    }
  }
  EXPECT_TRUE(steps[2]["metrics"].contains("eval_accuracy"));
  // The export is the base with the adapters merged in: a whole model folder.
  EXPECT_TRUE(fs::exists(run / "export" / "model.safetensors"));
  // The checkpoint: the adapters' master weights and the base by folder and hash, no model.
  bool found = false;
  for (const auto& e : fs::recursive_directory_iterator(run)) {
    if (e.path().filename() != "lora.json") continue;
    found = true;
    auto j = nlohmann::json::parse(slurp(e.path()));
    EXPECT_EQ(j["base_model"].get<std::string>(), (setup_dir() / "model").string());
    EXPECT_EQ(j["base_hash"].get<std::string>().size(), 16u);
    EXPECT_EQ(j["rank"].get<int>(), 8);
    EXPECT_EQ(fs::file_size(e.path().parent_path() / "master.bin"),
              static_cast<uintmax_t>(adapter_bytes()));
    EXPECT_FALSE(fs::exists(e.path().parent_path() / "model"));
  }
  EXPECT_TRUE(found) << "no LoRA checkpoint under " << run;
}

TEST(LoraGraph, IpcFeedsAdaptersToAnEngineInAWorkerProcess) {
  // The engine in a second process: each version's adapters cross in shared memory, checked by
  // their hashes, and its log-probs equal the trainer's bit for bit.
  fs::path run = scratch("lora-ipc");
  const int port = 40000 + (::getpid() + 7) % 20000;
  auto r = start(
      "run graphs/grpo_lora.capnp --set publisher.transport=ipc "
      "--set rollout.placement=w1 --set run.steps=3 --set run.batchSize=4 "
      "--set trainer.evalInterval=0 --listen 127.0.0.1:" +
          std::to_string(port) + paths(run),
      "lora-ipc-run");
  auto w =
      start("worker --connect 127.0.0.1:" + std::to_string(port) + " --name w1", "lora-ipc-worker");
  auto done = r.wait(std::chrono::seconds(120));
  ASSERT_EQ(done.status, 0) << done.err << done.out;
  EXPECT_EQ(w.wait(std::chrono::seconds(30)).status, 0);
  auto steps = steps_of(run);
  ASSERT_EQ(steps.size(), 3u);
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto& m = steps[i]["metrics"];
    EXPECT_EQ(m["train_rollout_logprob_abs_diff_max"].get<double>(), 0.0) << "step " << i + 1;
    if (i > 0) {
      EXPECT_TRUE(m.contains("publish_apply_seconds"));
      EXPECT_EQ(m["publish_bytes"].get<double>(), adapter_bytes());
    }
  }
}

/// graphs/grpo_lora.capnp in the async schedule (one version ahead, kept copies of the adapters).
fs::path async_lora_graph() {
  std::string g = slurp(fs::path(source_dir()) / "graphs" / "grpo_lora.capnp");
  const std::string sync = "schedule = (sync = void),";
  g.replace(g.find(sync), sync.size(), "schedule = (async = (maxStaleness = 1)),");
  fs::path f = scratch("lora-async-graph") / "grpo_lora_async.capnp";
  std::ofstream(f) << g;
  return f;
}

// The async schedule: the engine samples up to one version ahead of training, each version of
// the adapters adopted from the trainer's kept copy. Samples of the version the trainer holds have
// its log-probs bit for bit, older ones do not: the engine really samples with each new adapter.
// (Which steps mix versions depends on timing; every kind of step is checked.)
TEST(LoraGraph, AsyncEngineSamplesWithTheNewAdaptersWithinTheBound) {
  fs::path run = scratch("lora-async");
  auto r = run_milesrt("run '" + async_lora_graph().string() +
                           "' --set run.steps=8 --set run.batchSize=4 "
                           "--set trainer.evalInterval=0 --set publisher.handover=copy "
                           "--set publisher.keepVersions=4" +
                           paths(run),
                       "lora-async-run");
  ASSERT_EQ(r.status, 0) << r.err;
  auto steps = steps_of(run);
  ASSERT_EQ(steps.size(), 8u);
  int fresh_steps = 0, stale_steps = 0;
  for (const auto& s : steps) {
    EXPECT_EQ(s["counters"]["stale_violations"].get<int>(), 0);
    EXPECT_GT(s["metrics"]["grad_norm"].get<double>(), 0.0);
    const auto& m = s["metrics"];
    const bool stale = s["staleness"].contains("1");
    const bool fresh = s["staleness"].contains("0");
    const double diff = m["train_rollout_logprob_abs_diff_max"].get<double>();
    if (fresh && !stale) {
      fresh_steps++;
      EXPECT_EQ(diff, 0.0) << s.dump();
    } else if (stale && !fresh) {
      stale_steps++;
      EXPECT_GT(diff, 0.0) << s.dump();
    } else {
      fresh_steps++;
      stale_steps++;
      EXPECT_EQ(m["train_rollout_logprob_abs_diff_max_newest"].get<double>(), 0.0) << s.dump();
      EXPECT_GT(m["train_rollout_logprob_abs_diff_max_older"].get<double>(), 0.0) << s.dump();
    }
  }
  EXPECT_GT(fresh_steps, 0);
  EXPECT_GT(stale_steps, 0) << "the engine never ran ahead of the trainer";
}

TEST(LoraGraph, ValidationNamesTheLoraField) {
  struct bad_case {
    std::string set, expect;
  };
  for (const auto& c : std::vector<bad_case>{
           {"trainer.lora.rank=0", "trainer.lora.rank: must be between 1 and 4096"},
           {"rollout.lora.alpha=-1", "rollout.lora.alpha: must be finite and > 0"},
           {"trainer.lora.dropout=1", "trainer.lora.dropout: must be in [0, 1)"},
           {"trainer.lora.merge=true", "trainer.lora.merge: applies to the rollout kind only"},
           // The engine would serve other adapters than the trainer trains and publishes.
           {"rollout.lora.rank=4",
            "actor 'trainer': params.trainer.lora: 'rank 8, alpha 16, useRslora false"},
           {"trainer.lora.seed=3", "' on actor 'rollout' (lora); every actor stating lora"},
       }) {
    auto r = run_milesrt("validate graphs/grpo_lora.capnp --set " + c.set, "lora-validate");
    EXPECT_EQ(r.status, 2) << c.set;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.set << ": " << r.err;
  }
}

// A LoRA run's export holds the adapters in peft's format (export/adapter): peft (PyPI) loads them
// onto the base with the log-probs milesrt scores on the merged export; a second run starts from
// that folder on both the trainer and the engine (their log-probs agree bit for bit from step 1),
// and one whose settings differ from the folder's is refused naming the field.
TEST(LoraGraph, TheExportLoadsInPeftAndARunStartsFromIt) {
  fs::path run = scratch("lora-peft");
  auto r = run_milesrt(
      "run graphs/grpo_lora.capnp --set run.steps=2 --set run.batchSize=4 "
      "--set trainer.evalInterval=2" +
          paths(run),
      "lora-peft-run");
  ASSERT_EQ(r.status, 0) << r.err;
  const fs::path adapter = run / "export" / "adapter";
  ASSERT_TRUE(fs::exists(adapter / "adapter_config.json"));
  ASSERT_TRUE(fs::exists(adapter / "adapter_model.safetensors"));
  // peft's log-probs of base + adapter against milesrt's of the merged export.
  const std::vector<std::vector<int64_t>> seqs = {{1, 5, 7, 9, 3, 2}, {4, 4, 8, 1, 6, 10, 12, 2}};
  std::ofstream(run / "seqs.json") << nlohmann::json({{"sequences", seqs}}).dump();
  const std::string cmd = std::string("'") + MILESRT_PYTHON + "' '" + source_dir() +
                          "/test/oracle/peft_oracle.py' check '" +
                          (setup_dir() / "model").string() + "' '" + adapter.string() + "' '" +
                          (run / "seqs.json").string() + "' > '" + (run / "peft.json").string() +
                          "' 2> '" + (run / "peft.err").string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << slurp(run / "peft.err");
  auto peft = nlohmann::json::parse(slurp(run / "peft.json"))["logprobs"];
  std::ofstream lines(run / "score.jsonl");
  for (const auto& s : seqs) lines << nlohmann::json({{"ids", s}}).dump() << "\n";
  lines.close();
  auto sc = run_milesrt("score --model '" + (run / "export").string() + "' < '" +
                            (run / "score.jsonl").string() + "'",
                        "lora-peft-score");
  ASSERT_EQ(sc.status, 0) << sc.err;
  std::istringstream out(sc.out);
  std::string line;
  double worst = 0;
  for (size_t i = 0; std::getline(out, line); ++i) {
    ASSERT_LT(i, seqs.size());
    std::vector<double> ours = nlohmann::json::parse(line)["logprobs"];
    std::vector<double> theirs = peft[i];
    ASSERT_EQ(ours.size(), theirs.size());
    for (size_t t = 0; t < ours.size(); ++t) worst = std::max(worst, std::abs(ours[t] - theirs[t]));
  }
  EXPECT_LT(worst, 1e-4);
  std::cout << "export: max |milesrt (merged) - peft (base + adapter)| = " << worst << "\n";
  // A run that starts from the adapter: the trainer and the engine both load it.
  fs::path again = scratch("lora-peft-again");
  const std::string from = " --set trainer.lora.adapter=" + adapter.string() +
                           " --set rollout.lora.adapter=" + adapter.string();
  r = run_milesrt(
      "run graphs/grpo_lora.capnp --set run.steps=1 --set run.batchSize=4" + paths(again) + from,
      "lora-peft-again-run");
  ASSERT_EQ(r.status, 0) << r.err;
  auto steps = steps_of(again);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0]["metrics"]["train_rollout_logprob_abs_diff_max"].get<double>(), 0.0);
  // Only the engine starting from it would make the two disagree: refused settings say so first.
  auto bad = run_milesrt("validate graphs/grpo_lora.capnp --set trainer.lora.rank=4" + from,
                         "lora-peft-validate");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("trainer.lora.rank: 4, but the adapter " + adapter.string() + " has 8"),
            std::string::npos)
      << bad.err;
}

}  // namespace
