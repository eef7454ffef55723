// End to end: a sync run is bit-identical whatever the CPU load, and a resumed sync run equals the
// uninterrupted one bit for bit, through the real milesrt executable on the tiny arithmetic setup.
// Load changes when each prompt reaches the engine, so which samples share an engine step and in
// which order a group's samples finish; none of that may show in what the trainer sees.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "test/support/arith_setup.hpp"
#include "test/support/metrics_log.hpp"

namespace {
using namespace milesrt::testing;

/// Busy-loop child processes, one per core, competing with a run for the CPU while they live.
class cpu_load {
 public:
  cpu_load() {
    const unsigned n = std::max(2u, std::thread::hardware_concurrency());
    for (unsigned i = 0; i < n; ++i) {
      const pid_t pid = ::fork();
      if (pid == 0) {
        volatile uint64_t x = 0;
        for (;;) x = x + 1;
      }
      if (pid > 0) children_.push_back(pid);
    }
  }
  ~cpu_load() {
    for (pid_t pid : children_) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  size_t size() const { return children_.size(); }

 private:
  std::vector<pid_t> children_;
};

/// Metrics that measure time, or the engine's state at the moment a group finished (how many
/// requests were running or waiting, KV blocks in use, prefix hits so far): they depend on
/// timing by nature and are left out of the comparison.
bool measures_timing(const std::string& key) {
  for (const char* word :
       {"seconds", "per_s", "_ms", "rollout_running", "rollout_waiting", "rollout_kv_blocks_used",
        "rollout_prefix_hit_rate", "rollout_preemptions", "rollout_prefill_tokens",
        "rollout_decode_tokens", "memory", "rss", "_replica_items/"})
    if (key.find(word) != std::string::npos) return true;
  return false;
}

/// Every metric of `a`'s and `b`'s steps from `from` on that does not measure timing, compared
/// exactly (as JSON numbers: the same double); returns how many were compared.
size_t expect_same_steps(const std::vector<nlohmann::json>& a, const std::vector<nlohmann::json>& b,
                         size_t from) {
  EXPECT_EQ(a.size(), b.size());
  size_t compared = 0;
  for (size_t i = from; i < std::min(a.size(), b.size()); ++i) {
    const auto& ma = a[i]["metrics"];
    const auto& mb = b[i]["metrics"];
    for (const auto& [key, value] : ma.items()) {
      if (measures_timing(key)) continue;
      const auto other = mb.find(key);
      if (other == mb.end()) {
        ADD_FAILURE() << "step " << i + 1 << ": no " << key;
        continue;
      }
      EXPECT_EQ(value, *other) << "step " << i + 1 << " " << key;
      ++compared;
    }
    EXPECT_EQ(a[i]["origins"], b[i]["origins"]) << "step " << i + 1;
    EXPECT_EQ(a[i].value("lists", nlohmann::json()), b[i].value("lists", nlohmann::json()))
        << "step " << i + 1;
  }
  return compared;
}

TEST(Determinism, ASyncRunIsBitIdenticalUnderCpuLoadAndAcrossAResume) {
  // 16 groups of 8 samples: more sequences than the CPU engine runs at once (64), so which of a
  // group's samples wait, and in which order they finish, depends on when its prompt arrived. (With
  // 4 groups the finishing order follows the samples' lengths alone, and the runs agreed before
  // samples were put in index order.)
  const fs::path setup = shared_arith_setup("determinism-setup");
  auto args = [&](const fs::path& run, int steps) {
    const std::string s = setup.string();
    return "run graphs/grpo_sync.capnp --quiet --set run.batchSize=16 --set run.steps=" +
           std::to_string(steps) +
           " --set run.checkpointInterval=2 --set trainer.lrSchedule=constant "
           "--set trainer.evalInterval=0 --run-dir '" +
           run.string() + "' --set trainer.model=" + s + "/model --set rollout.model=" + s +
           "/model --set data.path=" + s + "/rl.jsonl --set trainer.evalData=" + s +
           "/heldout.jsonl --set trainer.exportDir=" + (run / "export").string();
  };
  const fs::path quiet = scratch("det-quiet"), loaded = scratch("det-loaded"),
                 split = scratch("det-split");
  auto a = run_milesrt(args(quiet, 4), "det-a");
  ASSERT_EQ(a.status, 0) << a.err;
  {
    cpu_load load;
    ASSERT_GE(load.size(), 2u);
    auto b = run_milesrt(args(loaded, 4), "det-b");
    ASSERT_EQ(b.status, 0) << b.err;
    auto c = run_milesrt(args(split, 2), "det-c");
    ASSERT_EQ(c.status, 0) << c.err;
  }
  auto d = run_milesrt(args(split, 4) + " --resume '" + split.string() + "'", "det-d");
  ASSERT_EQ(d.status, 0) << d.err;

  const auto sa = steps_of(quiet), sb = steps_of(loaded), sd = steps_of(split);
  ASSERT_EQ(sa.size(), 4u);
  EXPECT_GT(expect_same_steps(sa, sb, 0), 4 * 5u) << "too few metrics compared";
  EXPECT_GT(expect_same_steps(sa, sd, 0), 4 * 5u);
  EXPECT_EQ(slurp(quiet / "export" / "model.safetensors"),
            slurp(loaded / "export" / "model.safetensors"))
      << "the run under load trained other weights";
  EXPECT_EQ(slurp(quiet / "export" / "model.safetensors"),
            slurp(split / "export" / "model.safetensors"))
      << "the resumed run's weights differ from the uninterrupted run's";
}

}  // namespace
