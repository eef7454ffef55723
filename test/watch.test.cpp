// Watching a run: the GRPO graph on the tiny arithmetic setup (graphs/grpo_async.capnp, as
// test/grpo.test.cpp runs it) with its TensorBoard files read back by TensorBoard's reader, its
// GET /metrics scraped and parsed by prometheus_client while it runs, and its live page (and
// `milesrt watch` of the finished run) driven in headless Chromium. The readers are the real
// Python packages (test/watch/*.py); each script exits non-zero naming what disagrees.
#include <gtest/gtest.h>

#include <csignal>
#include <nlohmann/json.hpp>
#include <regex>

#include "test/support/arith_setup.hpp"

namespace {
using namespace milesrt::testing;

const char* kActors = "data,rollout,reward,filter,trainer,publisher";

const fs::path& setup_dir() { return shared_arith_setup("watch-setup"); }

/// `run graphs/grpo_async.capnp` on the tiny setup, `steps` steps of 4 groups.
std::string grpo_args(const fs::path& run, int steps, int eval_interval = 0, bool quiet = true) {
  const std::string s = setup_dir().string();
  return std::string("run graphs/grpo_async.capnp") + (quiet ? " --quiet" : "") +
         " --set run.maxOverSampling=0" + " --run-dir '" + run.string() +
         "' --set run.steps=" + std::to_string(steps) +
         " --set run.batchSize=4 --set trainer.evalInterval=" + std::to_string(eval_interval) +
         " --set trainer.model=" + s + "/model --set rollout.model=" + s + "/model" +
         " --set trainer.evalData=" + s + "/heldout.jsonl" + " --set data.path=" + s +
         "/rl.jsonl --set trainer.exportDir=" + (run / "export").string();
}

/// Runs a Python reader; its exit status and output.
result python(const std::string& script_and_args, const std::string& tag) {
  fs::path d = scratch(tag);
  std::string cmd = std::string("'") + MILESRT_PYTHON + "' '" + source_dir() + "/test/watch/" +
                    script_and_args + " >'" + (d / "out").string() + "' 2>&1";
  int raw = std::system(cmd.c_str());
  result r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = slurp(d / "out");
  return r;
}

/// What this machine lacks of the readers (.ci/install brings them all), or "".
std::string missing_readers(bool browser) {
  std::string cmd = std::string("'") + MILESRT_PYTHON +
                    "' -c 'import tensorboard, prometheus_client, selenium' > /dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0)
    return "the Python packages tensorboard, prometheus_client, selenium";
  if (browser && (!fs::exists("/usr/bin/chromium") || !fs::exists("/usr/bin/chromedriver"))) {
    return "/usr/bin/chromium and /usr/bin/chromedriver";
  }
  return "";
}

/// Without the readers the tests cannot run: a skip elsewhere (the GPU machine has none), a
/// failure in CI, where .ci/install must have brought them.
#define MILESRT_NEED_READERS(browser)                                                        \
  do {                                                                                       \
    auto missing = missing_readers(browser);                                                 \
    if (!missing.empty()) {                                                                  \
      if (std::getenv("CI") != nullptr) FAIL() << "missing " << missing << " (.ci/install)"; \
      GTEST_SKIP() << "missing " << missing << " (.ci/install brings them)";                 \
    }                                                                                        \
  } while (0)

/// Waits for the "http://127.0.0.1:PORT/" a background milesrt prints on stdout.
std::string url_of(const background& b) {
  static const std::regex url(R"(http://127\.0\.0\.1:[0-9]+/)");
  for (int i = 0; i < 600 && !b.ended(); ++i) {
    std::smatch m;
    std::string out = slurp(b.dir / "out");
    if (std::regex_search(out, m, url)) return m[0];
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return "";
}

TEST(Watch, TensorboardFilesHoldEveryValueOfMetricsJsonl) {
#ifndef MILESRT_HAVE_TENSORBOARD
  GTEST_SKIP() << "built without protobuf: no tensorboard sink";
#endif
  MILESRT_NEED_READERS(false);
  fs::path run = scratch("watch-tb");
  auto r =
      run_milesrt(grpo_args(run, 3, 3, false) + " --set run.sinks=tensorboard", "watch-tb-run");
  ASSERT_EQ(r.status, 0) << r.err;
  // Long work reports progress (plain lines: stderr is not a terminal here).
  EXPECT_NE(r.err.find("actor 'trainer': loading " + setup_dir().string() + "/model: 1/1 in "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("actor 'trainer': evaluation at step 3: 0/8\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("actor 'trainer': evaluation at step 3: 8/8 in "), std::string::npos)
      << r.err;
  auto check = python("tensorboard_check.py' '" + run.string() +
                          "' loss reward_mean run/staleness response_length advantage",
                      "watch-tb-check");
  EXPECT_EQ(check.status, 0) << check.out;
  std::cout << check.out;
}

TEST(Watch, PrometheusMetricsScrapedWhileTheGraphRuns) {
  MILESRT_NEED_READERS(false);
  fs::path run = scratch("watch-prom");
  auto b =
      start(grpo_args(run, 14) + " --metrics-port 0 --set run.sinks=prometheus", "watch-prom-run");
  std::string url = url_of(b);
  ASSERT_FALSE(url.empty()) << b.wait(std::chrono::seconds(1)).err;
  EXPECT_EQ(slurp(b.dir / "out").find("live page"), std::string::npos);  // prometheus only
  auto check =
      python("prometheus_check.py' '" + url + "' '" + run.string() + "' " + kActors +
                 " milesrt_step,milesrt_version,milesrt_published_version,milesrt_edge_queue_depth,"
                 "milesrt_rollout_decode_tokens_per_s,milesrt_rollout_kv_blocks_used,"
                 "milesrt_rollout_prefix_hit_rate,milesrt_restarts,milesrt_dropped_stale,"
                 "milesrt_train_tokens_per_s,milesrt_in_flight,milesrt_buffered",
             "watch-prom-check");
  EXPECT_EQ(check.status, 0) << check.out;
  std::cout << check.out;
  auto done = b.wait(std::chrono::seconds(180));
  EXPECT_EQ(done.status, 0) << done.err;
}

TEST(Watch, LivePageInHeadlessChromiumThenWatchOfTheFinishedRun) {
  MILESRT_NEED_READERS(true);
  fs::path run = scratch("watch-page");
  auto b = start(
      grpo_args(run, 24) +
          " --metrics-port 0 --set run.sinks=page,prometheus"
          " --set run.chart=reward_mean,loss,response_length_mean,rollout_decode_tokens_per_s",
      "watch-page-run");
  std::string url = url_of(b);
  ASSERT_FALSE(url.empty()) << b.wait(std::chrono::seconds(1)).err;
  const std::string shot = std::string(MILESRT_BINARY_DIR) + "/test/watch_page.png";
  auto check = python("page_check.py' '" + url + "' '" + run.string() + "' " + kActors +
                          " --running --screenshot '" + shot + "' --screenshot-at-step 8",
                      "watch-page-check");
  EXPECT_EQ(check.status, 0) << check.out;
  std::cout << check.out;
  EXPECT_TRUE(fs::exists(shot));
  auto done = b.wait(std::chrono::seconds(180));
  ASSERT_EQ(done.status, 0) << done.err;

  // The finished run through `milesrt watch RUN_DIR`: the same page, from live.json and
  // metrics.jsonl.
  auto w = start("watch '" + run.string() + "' --port 0", "watch-page-watch");
  std::string wurl = url_of(w);
  ASSERT_FALSE(wurl.empty()) << w.wait(std::chrono::seconds(1)).err;
  auto wcheck = python(
      "page_check.py' '" + wurl + "' '" + run.string() + "' " + kActors + " --state finished",
      "watch-page-watch-check");
  EXPECT_EQ(wcheck.status, 0) << wcheck.out;
  std::cout << wcheck.out;
  ::kill(w.pid(), SIGTERM);
  EXPECT_EQ(w.wait(std::chrono::seconds(10)).status, 0);
}

TEST(Watch, APortInUseAndAnUnwritableRunDirAreBadInput) {
  fs::path run = scratch("watch-bad");
  // A folder with neither metrics.jsonl nor live.json: watch refuses it.
  auto refused = run_milesrt("watch '" + run.string() + "' --port 0", "watch-bad-empty");
  EXPECT_EQ(refused.status, 2);
  EXPECT_NE(refused.err.find("not a run directory"), std::string::npos) << refused.err;

  // Hold a port with `milesrt watch`, then ask a run and a second watch for it.
  std::ofstream(run / "metrics.jsonl") << "";
  auto holder = start("watch '" + run.string() + "' --port 0", "watch-bad-holder");
  std::string url = url_of(holder);
  ASSERT_FALSE(url.empty()) << holder.wait(std::chrono::seconds(1)).err;
  std::string port = url.substr(url.rfind(':') + 1);
  port.pop_back();
  fs::path other = scratch("watch-bad-run");
  auto r = run_milesrt(
      "run examples/toy/toy_sync.capnp --run-dir '" + other.string() + "' --metrics-port " + port,
      "watch-bad-run");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("milesrt run: error: cannot listen on 127.0.0.1:" + port + ": bind: "),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(other / "metrics.jsonl"));  // nothing started
  auto w = run_milesrt("watch '" + run.string() + "' --port " + port, "watch-bad-watch");
  EXPECT_EQ(w.status, 2);
  EXPECT_NE(w.err.find("milesrt watch: error: cannot listen on 127.0.0.1:" + port),
            std::string::npos)
      << w.err;
  ::kill(holder.pid(), SIGTERM);
  EXPECT_EQ(holder.wait(std::chrono::seconds(10)).status, 0);

  std::ofstream(run / "a_file") << "x";
  const fs::path bad = run / "a_file" / "run";
  auto u = run_milesrt("run examples/toy/toy_sync.capnp --run-dir '" + bad.string() + "'",
                       "watch-bad-dir");
  EXPECT_EQ(u.status, 2);
  EXPECT_NE(
      u.err.find("milesrt run: error: run directory " + bad.string() + ": cannot create it: "),
      std::string::npos)
      << u.err;
}

}  // namespace
