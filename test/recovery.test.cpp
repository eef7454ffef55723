// End to end: runs that survive crashes. `milesrt run --supervise` with its run process killed
// (kill -9) at random points resumes from the newest complete checkpoint and trains every admitted
// item exactly once; a run that keeps failing ends after --max-restarts with its error.
#include <csignal>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>

#include "runtime/testing/flip_bytes.hpp"
#include "test/support.hpp"
#include "test/support/metrics_log.hpp"

namespace {
using namespace milesrt::testing;

/// Steps logged so far (a line being written may be incomplete: not counted).
size_t steps_of_safe(const fs::path& run) {
  size_t n = 0;
  std::istringstream in(slurp(run / "metrics.jsonl"));
  std::string line;
  while (std::getline(in, line))
    if (!nlohmann::json::parse(line, nullptr, false).is_discarded()) ++n;
  return n;
}

/// The pid of the newest run process a supervisor announced on stderr ("run process P started"),
/// and how many it announced.
std::pair<pid_t, size_t> newest_child(const std::string& err) {
  static const std::regex started("run process ([0-9]+) started");
  pid_t pid = 0;
  size_t n = 0;
  for (auto it = std::sregex_iterator(err.begin(), err.end(), started);
       it != std::sregex_iterator(); ++it) {
    pid = static_cast<pid_t>(std::stol((*it)[1]));
    ++n;
  }
  return {pid, n};
}

TEST(Supervise, RandomKillsOfTheRunProcessLoseAndDuplicateNothing) {
  auto dir = scratch("supervise");
  const int steps = 60, batch = 4, kills = 5;
  auto run =
      start("run examples/toy/toy_async.capnp --quiet --supervise --max-restarts 10 --run-dir '" +
                (dir / "run").string() + "' --set run.steps=" + std::to_string(steps) +
                " --set run.checkpointInterval=3 --set stage.delay_ms=15",
            "supervise-run");
  std::mt19937 rng(std::random_device{}());
  int killed = 0;
  for (int k = 0; k < kills && !run.ended(); ++k) {
    // Wait for the k-th run process and for it to log a random number (1 to 5) of steps of its
    // own, then kill -9 it a random moment later: mid-step, mid-checkpoint, or between.
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (newest_child(slurp(run.dir / "err")).second < size_t(k + 1) && !run.ended()) {
      ASSERT_LT(std::chrono::steady_clock::now(), until)
          << "no run process " << k + 1 << ": " << slurp(run.dir / "err");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const size_t from = steps_of_safe(dir / "run");
    const size_t more = std::uniform_int_distribution<size_t>(1, 5)(rng);
    while (steps_of_safe(dir / "run") < from + more && !run.ended()) {
      ASSERT_LT(std::chrono::steady_clock::now(), until) << slurp(run.dir / "err");
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 40)(rng)));
    if (run.ended()) break;
    if (::kill(newest_child(slurp(run.dir / "err")).first, SIGKILL) == 0) ++killed;
  }
  auto r = run.wait(std::chrono::seconds(120));
  ASSERT_EQ(r.status, 0) << r.err;
  std::cout << "killed the run process " << killed << " times; the supervisor said:\n" << r.err;
  ASSERT_GE(killed, 2) << "the run ended before it could be killed: make it longer";
  EXPECT_NE(r.err.find("was killed by signal 9 (Killed); restarting from checkpoint "),
            std::string::npos)
      << r.err;

  // Every step logged once, in order; every trained item trained once; the learner's running sum
  // (restored from checkpoints) equals the sum of what the log says it trained.
  auto lines = steps_of(dir / "run");
  ASSERT_EQ(lines.size(), size_t(steps));
  std::set<uint64_t> trained;
  double sum = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["step"].get<uint64_t>(), i + 1);
    EXPECT_EQ(lines[i]["version"].get<uint64_t>(), i + 1);
    ASSERT_TRUE(lines[i].contains("origins")) << lines[i].dump();
    EXPECT_EQ(lines[i]["origins"].size(), size_t(batch));
    for (auto o : lines[i]["origins"]) {
      EXPECT_TRUE(trained.insert(o.get<uint64_t>()).second) << "item " << o << " trained twice";
      sum += double(o.get<uint64_t>() - 1);  // toy_source's item k is the number k - 1
    }
    for (auto& [staleness, n] : lines[i]["staleness"].items()) EXPECT_LE(std::stoi(staleness), 1);
  }
  EXPECT_EQ(trained.size(), size_t(steps * batch));
  EXPECT_EQ(lines.back()["metrics"]["total"].get<double>(), sum);
  auto summary = nlohmann::json::parse(slurp(dir / "run" / "summary.json"));
  EXPECT_TRUE(summary["ok"].get<bool>());
  EXPECT_EQ(summary["steps"], steps);
}

TEST(Supervise, ARunThatKeepsFailingEndsAfterMaxRestarts) {
  auto dir = scratch("supervise-fail");
  auto r = run_milesrt(
      "run examples/toy/toy_sync.capnp --quiet --supervise --max-restarts 2 --run-dir '" +
          (dir / "run").string() + "' --set learner.die_at_step=2",
      "supervise-fail");
  EXPECT_EQ(r.status, 1) << r.err;
  // Three run processes (the first and two restarts), each failing with the learner's death.
  EXPECT_EQ(newest_child(r.err).second, 3u) << r.err;
  EXPECT_NE(r.err.find("toy_learner told to die at step 2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("restarting from the beginning (no complete checkpoint yet)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("exited with status 1; gave up after 2 restart(s) (--max-restarts 2)"),
            std::string::npos)
      << r.err;
}

TEST(Supervise, BadOptionsAreRefusedBeforeAnythingStarts) {
  auto a = run_milesrt("run examples/toy/toy_sync.capnp --max-restarts 2", "sup-bad-a");
  EXPECT_EQ(a.status, 2);
  EXPECT_NE(a.err.find("--max-restarts needs --supervise"), std::string::npos) << a.err;
  auto dir = scratch("sup-bad-b");
  auto b = run_milesrt(
      "run examples/toy/toy_sync.capnp --supervise --resume '" + dir.string() + "'", "sup-bad-b");
  EXPECT_EQ(b.status, 2);
  EXPECT_NE(
      b.err.find("cannot resume: no complete checkpoint under " + (dir / "checkpoints").string()),
      std::string::npos)
      << b.err;
  EXPECT_EQ(b.err.find("run process"), std::string::npos) << b.err;
  // A bad graph is bad input once, not restarted.
  auto c =
      run_milesrt("run examples/toy/toy_sync.capnp --supervise --set stage.nope=1", "sup-bad-c");
  EXPECT_EQ(c.status, 2);
  EXPECT_EQ(c.err.find("run process"), std::string::npos) << c.err;
}

// -- Worker processes killed with -9 -------------------------------------------------------------

/// The toy graph with its stage (of `kind`, two replicas, `delay_ms` per item) on the worker "w1".
fs::path placed_graph(const fs::path& dir, const std::string& kind, int steps, int delay_ms = 10) {
  return toy_graph_on_worker(
      dir, steps, kind,
      "(custom = [(name = \"delay_ms\", value = (int = " + std::to_string(delay_ms) + "))])");
}

int free_port(int k) { return 21000 + (::getpid() * 7 + k) % 19000; }

background start_worker(int port, const std::string& tag) {
  return start("worker --connect 127.0.0.1:" + std::to_string(port) + " --name w1 --plugin '" +
                   toy_plugin() + "'",
               tag);
}

/// Waits until the run has logged `n` steps.
void wait_for_steps(const fs::path& run_dir, size_t n, const background& run) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (steps_of_safe(run_dir) < n) {
    ASSERT_FALSE(run.ended()) << slurp(run.dir / "err");
    ASSERT_LT(std::chrono::steady_clock::now(), until) << "the run never made " << n << " steps";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

TEST(Workers, AKilledWorkerIsReplacedAndGetsTheSameActors) {
  auto dir = scratch("worker-replaced");
  const int port = free_port(1), steps = 40;
  auto run = start("run '" + placed_graph(dir, "toy_flaky_stage", steps).string() +
                       "' --listen 127.0.0.1:" + std::to_string(port) + " --run-dir '" +
                       (dir / "run").string() + "' --set run.workerGraceSeconds=30",
                   "replaced-run");
  auto first = start_worker(port, "replaced-w1");
  wait_for_steps(dir / "run", 3, run);
  ::kill(first.pid(), SIGKILL);
  const auto killed_at = std::chrono::steady_clock::now();
  // The run notices within a second or two, long before the grace period ends.
  while (slurp(run.dir / "err").find("worker 'w1' went away") == std::string::npos) {
    ASSERT_LT(std::chrono::steady_clock::now() - killed_at, std::chrono::seconds(5))
        << slurp(run.dir / "err");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto second = start_worker(port, "replaced-w1-again");
  auto r = run.wait(std::chrono::seconds(90));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("waiting up to 30 s for a worker to join as 'w1'"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("worker 'w1' joined again; its actors are back"), std::string::npos)
      << r.err;
  EXPECT_EQ(second.wait(std::chrono::seconds(30)).status, 0);
  // Every step once, at staleness 0 (the new replicas got the newest version before their first
  // item), every item trained once.
  auto lines = steps_of(dir / "run");
  ASSERT_EQ(lines.size(), size_t(steps));
  std::set<uint64_t> trained;
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["step"].get<uint64_t>(), i + 1);
    EXPECT_EQ(lines[i]["staleness"].dump(), "{\"0\":4}") << "step " << i + 1;
    for (auto o : lines[i]["origins"]) EXPECT_TRUE(trained.insert(o.get<uint64_t>()).second) << o;
  }
  EXPECT_EQ(trained.size(), size_t(steps * 4));
  auto summary = nlohmann::json::parse(slurp(dir / "run" / "summary.json"));
  EXPECT_EQ(summary["counters"]["restarts"].get<int>(), 2) << summary.dump();  // both replicas
}

TEST(Workers, AWorkerNotReplacedWithinTheGraceFailsTheRunNamingWhatWasLost) {
  auto dir = scratch("worker-lost");
  const int port = free_port(2);
  auto run = start("run '" + placed_graph(dir, "toy_flaky_stage", 100000000, 300).string() +
                       "' --listen 127.0.0.1:" + std::to_string(port) + " --run-dir '" +
                       (dir / "run").string() + "' --set run.workerGraceSeconds=1.5",
                   "lost-run");
  auto worker = start_worker(port, "lost-w1");
  wait_for_steps(dir / "run", 2, run);
  // Each item takes 300 ms: the stage's replicas are busy with some when the worker dies.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ::kill(worker.pid(), SIGKILL);
  const auto killed_at = std::chrono::steady_clock::now();
  auto r = run.wait(std::chrono::seconds(60));
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  ASSERT_EQ(r.status, 1) << r.err;
  EXPECT_GE(took, 1.4);
  EXPECT_LT(took, 10.0);
  EXPECT_NE(
      r.err.find(
          "milesrt run: error: worker 'w1' went away (its process ended or its connection was "
          "lost) "
          "and no worker joined as 'w1' within 1.5 s (run.workerGraceSeconds); it hosted stage "
          "(kind toy_flaky_stage, replicas 0-1); in flight: stage["),
      std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("'process items (item "), std::string::npos) << r.err;
  std::cout << "the run's error: " << r.err;
}

using milesrt::testing::flip_bytes;

TEST(Resume, ACorruptOrStrayNewerCheckpointIsNamedSkippedOrRefusedWhenStrict) {
  auto dir = scratch("resume-corrupt");
  const fs::path whole = dir / "whole", run = dir / "run", ck = run / "checkpoints";
  const std::string graph =
      "run examples/toy/toy_sync.capnp --quiet --set run.checkpointInterval=2";
  auto w = run_milesrt(graph + " --set run.steps=8 --run-dir '" + whole.string() + "'", "rc-whole");
  ASSERT_EQ(w.status, 0) << w.err;
  auto a = run_milesrt(graph + " --set run.steps=6 --run-dir '" + run.string() + "'", "rc-a");
  ASSERT_EQ(a.status, 0) << a.err;
  // step-6: the learner's running total flipped, the file's size unchanged; step-7: a manifest
  // whose byte count is a string; a stray folder whose number does not fit 64 bits.
  ASSERT_EQ(fs::file_size(ck / "step-6" / "learner-0.state"), 16u);
  flip_bytes(ck / "step-6" / "learner-0.state", 8, 8);
  fs::create_directories(ck / "step-7");
  std::ofstream(ck / "step-7" / "driver.bin") << "x";
  std::ofstream(ck / "step-7" / "manifest.json")
      << R"({"step": "7", "files": {"driver.bin": "1"}})";
  fs::create_directories(ck / "step-99999999999999999999999");

  auto strict = run_milesrt(
      graph + " --set run.steps=8 --strict-resume --resume '" + run.string() + "'", "rc-strict");
  EXPECT_EQ(strict.status, 2) << strict.err;
  EXPECT_NE(strict.err.find("cannot resume (--strict-resume): skipped checkpoint " +
                            (ck / "step-7").string() +
                            ": manifest.json: files.\"driver.bin\": expected a byte count, got "
                            "string \"1\""),
            std::string::npos)
      << strict.err;
  fs::remove_all(ck / "step-7");
  strict = run_milesrt(graph + " --set run.steps=8 --strict-resume --resume '" + run.string() + "'",
                       "rc-strict-6");
  EXPECT_EQ(strict.status, 2) << strict.err;
  EXPECT_NE(strict.err.find("skipped checkpoint " + (ck / "step-6").string() +
                            ": file learner-0.state has content hash "),
            std::string::npos)
      << strict.err;

  fs::create_directories(ck / "step-7");
  std::ofstream(ck / "step-7" / "manifest.json") << R"({"files": {"driver.bin": "1"}})";
  auto r = run_milesrt(graph + " --set run.steps=8 --resume '" + run.string() + "'", "rc-resume");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const std::string& line :
       {"milesrt run: warning: ignored " + (ck / "step-99999999999999999999999").string() +
            ": not a checkpoint",
        "milesrt run: warning: skipped checkpoint " + (ck / "step-7").string() +
            ": manifest.json: files.\"driver.bin\": expected a byte count, got string \"1\"",
        "milesrt run: warning: skipped checkpoint " + (ck / "step-6").string() +
            ": file learner-0.state has content hash ",
        "milesrt run: warning: resuming from checkpoint " + (ck / "step-4").string() + " (step 4)"})
    EXPECT_NE(r.err.find(line), std::string::npos) << line << "\n" << r.err;
  for (const char* raw : {"stoull", "json.exception", "type_error"})
    EXPECT_EQ(r.err.find(raw), std::string::npos) << r.err;
  // Steps 5 to 8 trained again from step 4's state: the run ends where the uninterrupted one did.
  auto sw = steps_of(whole), sr = steps_of(run);
  ASSERT_EQ(sr.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(sr[i]["step"], i + 1);
    EXPECT_EQ(sr[i]["metrics"]["total"], sw[i]["metrics"]["total"]) << "step " << i + 1;
  }
}

TEST(Resume, StrictResumeNeedsAResume) {
  auto r = run_milesrt("run examples/toy/toy_sync.capnp --strict-resume", "strict-alone");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--strict-resume needs --resume RUN_DIR or --supervise"), std::string::npos)
      << r.err;
}

}  // namespace
