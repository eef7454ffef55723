// End to end: who may join a run. `--listen` on an address other machines reach needs a shared
// secret; a worker with a wrong or missing secret, or under a name the graph places nothing on, is
// refused and both sides say why; the live page answers only requests naming a loopback host.
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "test/support.hpp"

namespace {
using namespace milesrt::testing;

int free_port() { return 21000 + ::getpid() % 20000; }

fs::path secret_file(const fs::path& dir, const std::string& name, const std::string& secret) {
  auto f = dir / name;
  std::ofstream(f) << secret << "\n";
  return f;
}

class Exposure : public ::testing::Test {
 protected:
  void SetUp() override { ::unsetenv("MILESRT_SECRET"); }
};

TEST_F(Exposure, ANonLoopbackListenNeedsASharedSecret) {
  auto dir = scratch("exposed");
  auto g = toy_graph_on_worker(dir, 3);
  for (const std::string at : {"0.0.0.0:", ":", "192.0.2.1:"}) {
    auto r = run_milesrt("run '" + g.string() + "' --quiet --listen " + at +
                         std::to_string(free_port()));
    EXPECT_EQ(r.status, 2) << at << r.err;
    EXPECT_NE(r.err.find("milesrt run: error: --listen " + at + std::to_string(free_port()) +
                         ": not a loopback address, so other machines could join the run; give "
                         "workers a shared secret with --secret-file FILE or MILESRT_SECRET"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
  }
  auto missing = run_milesrt("run '" + g.string() +
                             "' --quiet --listen 0.0.0.0:" + std::to_string(free_port()) +
                             " --secret-file '" + (dir / "nope").string() + "'");
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("--secret-file " + (dir / "nope").string() + ": cannot be read"),
            std::string::npos)
      << missing.err;
  auto empty = run_milesrt("run '" + g.string() +
                           "' --quiet --listen 0.0.0.0:" + std::to_string(free_port()) +
                           " --secret-file '" + secret_file(dir, "empty", "").string() + "'");
  EXPECT_EQ(empty.status, 2);
  EXPECT_NE(empty.err.find("its first line is empty"), std::string::npos) << empty.err;
  auto no_listen = run_milesrt("run examples/toy/toy_sync.capnp --quiet --secret-file '" +
                               secret_file(dir, "s", "x").string() + "'");
  EXPECT_EQ(no_listen.status, 2);
  EXPECT_NE(no_listen.err.find("--secret-file needs --listen HOST:PORT"), std::string::npos)
      << no_listen.err;
}

TEST_F(Exposure, WorkersWithoutTheSecretAreRefusedAndTheOneWithItJoins) {
  auto dir = scratch("secret");
  const int port = free_port() + 1;
  const auto connect = "worker --connect 127.0.0.1:" + std::to_string(port) +
                       " --name w1 --plugin '" + toy_plugin() + "'";
  auto run = start("run '" + toy_graph_on_worker(dir, 4).string() +
                       "' --quiet --set run.workerWaitSeconds=60 --listen 0.0.0.0:" +
                       std::to_string(port) + " --run-dir '" + (dir / "run").string() +
                       "' --secret-file '" + secret_file(dir, "right", "s3cret").string() + "'",
                   "secret-run");
  auto none = start(connect, "secret-none").wait(std::chrono::seconds(60));
  EXPECT_EQ(none.status, 2) << none.err;
  EXPECT_NE(none.err.find("milesrt worker: error: the run at 127.0.0.1:" + std::to_string(port) +
                          " refused this worker: it presented no shared secret"),
            std::string::npos)
      << none.err;
  auto wrong =
      start(connect + " --secret-file '" + secret_file(dir, "wrong", "guess").string() + "'",
            "secret-wrong")
          .wait(std::chrono::seconds(60));
  EXPECT_EQ(wrong.status, 2) << wrong.err;
  EXPECT_NE(wrong.err.find("refused this worker: it presented a wrong shared secret"),
            std::string::npos)
      << wrong.err;
  auto right = start(connect + " --secret-file '" + (dir / "right").string() + "'", "secret-right");
  auto r = run.wait(std::chrono::seconds(60));
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("(with the shared secret)"), std::string::npos) << r.out;
  // The run reported each refusal.
  EXPECT_NE(r.err.find("milesrt run: warning: refused a worker joining as 'w1' (process "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("): it presented no shared secret"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("): it presented a wrong shared secret"), std::string::npos) << r.err;
  EXPECT_EQ(right.wait(std::chrono::seconds(30)).status, 0);
}

TEST_F(Exposure, AWorkerUnderAnotherNameIsRefusedNamingTheExpectedOnes) {
  auto dir = scratch("names");
  const int port = free_port() + 2;
  auto run = start("run '" + toy_graph_on_worker(dir, 3).string() +
                       "' --quiet --set run.workerWaitSeconds=3 --listen 127.0.0.1:" +
                       std::to_string(port) + " --run-dir '" + (dir / "run").string() + "'",
                   "names-run");
  auto w = start("worker --connect 127.0.0.1:" + std::to_string(port) + " --name W1 --plugin '" +
                     toy_plugin() + "'",
                 "names-worker")
               .wait(std::chrono::seconds(60));
  EXPECT_EQ(w.status, 2) << w.err;
  EXPECT_NE(w.err.find("refused this worker: no actor is placed on a worker named 'W1' (the "
                       "graph places actors on: w1)"),
            std::string::npos)
      << w.err;
  EXPECT_EQ(lines(w.err), 1u) << w.err;
  auto r = run.wait(std::chrono::seconds(60));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("milesrt run: warning: refused a worker joining as 'W1' (process "),
            std::string::npos)
      << r.err;
  // The run's error names the missing worker and the refused one.
  EXPECT_NE(r.err.find("milesrt run: error: worker(s) w1 did not join within 3 s"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("; refused a worker joining as 'W1'"), std::string::npos) << r.err;
  EXPECT_EQ(lines(r.err), 2u) << r.err;
}

TEST_F(Exposure, TheLivePageRefusesAForeignHost) {
  auto dir = scratch("rebinding");
  const int port = free_port() + 3;
  auto run = start(
      "run examples/toy/toy_sync.capnp --quiet --set run.steps=100000000 "
      "--metrics-port " +
          std::to_string(port) + " --run-dir '" + (dir / "run").string() + "'",
      "rebinding-run");
  const std::string python = MILESRT_PYTHON;
  auto get = [&](const std::string& host) {
    const std::string code =
        "import http.client,sys\n"
        "for i in range(100):\n"
        "  try:\n"
        "    c=http.client.HTTPConnection('127.0.0.1'," +
        std::to_string(port) +
        ",timeout=5); c.putrequest('GET','/api/live',skip_host=True); "
        "c.putheader('Host','" +
        host +
        "'); c.endheaders(); print(c.getresponse().status); sys.exit(0)\n"
        "  except ConnectionRefusedError:\n"
        "    import time; time.sleep(0.1)\n";
    std::ofstream(dir / "get.py") << code;
    auto out = dir / "status";
    std::system(
        ("'" + python + "' '" + (dir / "get.py").string() + "' > '" + out.string() + "'").c_str());
    return slurp(out);
  };
  EXPECT_EQ(get("localhost:" + std::to_string(port)), "200\n");
  EXPECT_EQ(get("attacker.example:" + std::to_string(port)), "421\n");
  ::kill(run.pid(), SIGTERM);
  run.wait(std::chrono::seconds(30));
}

}  // namespace
