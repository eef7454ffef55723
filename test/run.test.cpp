// End to end: `milesrt run` on the toy graphs (kinds from a plugin), resume, bad plugins, and a run
// spread over two processes, once to the end and once with the worker killed.
#include <csignal>
#include <iostream>
#include <nlohmann/json.hpp>

#include "test/support.hpp"

namespace {
using namespace milesrt::testing;

nlohmann::json summary(const fs::path& run_dir) {
  return nlohmann::json::parse(slurp(run_dir / "summary.json"));
}

TEST(Run, ToyGraphsRunToTheEnd) {
  for (const char* g : {"toy_sync", "toy_async"}) {
    auto dir = scratch(std::string("run-") + g);
    auto r = run_milesrt(std::string("run examples/toy/") + g + ".capnp --run-dir '" +
                         dir.string() + "' --set run.steps=7");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("step 7/7"), std::string::npos) << r.err;
    auto s = summary(dir);
    EXPECT_TRUE(s["ok"].get<bool>());
    EXPECT_EQ(s["steps"], 7);
    EXPECT_EQ(lines(slurp(dir / "metrics.jsonl")), 7u);
    auto last = nlohmann::json::parse(
        slurp(dir / "metrics.jsonl")
            .substr(
                slurp(dir / "metrics.jsonl").rfind('\n', slurp(dir / "metrics.jsonl").size() - 2) +
                1));
    EXPECT_EQ(last["step"], 7);
    EXPECT_TRUE(last.contains("staleness"));
    EXPECT_TRUE(last.contains("busy_seconds"));
    EXPECT_TRUE(last["metrics"].contains("loss"));
  }
}

TEST(Run, ResumePicksTheNewestCheckpoint) {
  auto dir = scratch("resume");
  auto a = run_milesrt("run examples/toy/toy_sync.capnp --quiet --run-dir '" + dir.string() +
                       "' --set run.steps=4 --set run.checkpointInterval=2");
  ASSERT_EQ(a.status, 0) << a.err;
  auto b = run_milesrt("run examples/toy/toy_sync.capnp --quiet --resume '" + dir.string() +
                       "' --set run.steps=6 --set run.checkpointInterval=2");
  ASSERT_EQ(b.status, 0) << b.err;
  EXPECT_EQ(summary(dir)["steps"], 6);
  EXPECT_EQ(lines(slurp(dir / "metrics.jsonl")), 6u);  // appended after the first four
  EXPECT_TRUE(fs::exists(dir / "checkpoints" / "step-6" / "manifest.json"));
}

TEST(Run, CheckpointsReportProgress) {
  auto dir = scratch("progress");
  auto r = run_milesrt("run examples/toy/toy_sync.capnp --run-dir '" + dir.string() +
                       "' --set run.steps=2 --set run.checkpointInterval=2");
  ASSERT_EQ(r.status, 0) << r.err;
  // Not a terminal: a line when it starts and one when it ends (4 snapshots: stage has 2 replicas).
  EXPECT_NE(r.err.find("checkpoint step 2: 0/4\ncheckpoint step 2: 4/4 in "), std::string::npos)
      << r.err;
  auto q = run_milesrt("run examples/toy/toy_sync.capnp --quiet --run-dir '" + dir.string() +
                       "' --set run.steps=2 --set run.checkpointInterval=2");
  ASSERT_EQ(q.status, 0) << q.err;
  EXPECT_EQ(q.err.find("checkpoint step"), std::string::npos) << q.err;
}

TEST(Run, MissingPluginIsBadInput) {
  auto dir = scratch("plugin");
  auto g = dir / "g.capnp";
  std::string text = slurp(fs::path(source_dir()) / "examples/toy/toy_sync.capnp");
  text.replace(text.find("libmilesrt_toy.so"), 17, "libnope.so");
  std::ofstream(g) << text;
  auto r = run_milesrt("run '" + g.string() + "'");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find(g.string() + ": plugin 'libnope.so': not found (looked at " +
                       (dir / "libnope.so").string()),
            std::string::npos)
      << r.err;
}

int free_port() { return 20000 + ::getpid() % 20000; }

TEST(TwoProcesses, ARunSpreadOverTwoProcesses) {
  auto dir = scratch("two");
  int port = free_port();
  auto run = start("run '" + toy_graph_on_worker(dir, 6).string() +
                       "' --quiet --listen 127.0.0.1:" + std::to_string(port) + " --run-dir '" +
                       (dir / "run").string() + "'",
                   "two-run");
  auto worker = start("worker --connect 127.0.0.1:" + std::to_string(port) +
                          " --name w1 --plugin '" + toy_plugin() + "'",
                      "two-worker");
  auto r = run.wait(std::chrono::seconds(60));
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_EQ(summary(dir / "run")["steps"], 6);
  auto w = worker.wait(std::chrono::seconds(30));
  EXPECT_EQ(w.status, 0) << w.err;  // the worker ends with the run
}

TEST(TwoProcesses, AServiceEdgeCrossesProcesses) {
  // Each item is doubled by toy_asker (two replicas on the worker) asking toy_doubler (two
  // replicas in the run's process) through a service edge: handles cross as data edges' do.
  auto dir = scratch("served");
  std::ofstream(dir / "served.capnp")
      << "@0xd3a1b2c3d4e5f608;\nusing import \"/milesrt/graph.capnp\".Graph;\n"
      << "const graph :Graph = (name = \"served\", plugins = [\"" << toy_plugin() << "\"],\n"
      << "actors = [(name = \"src\", kind = \"toy_source\"),\n"
      << "(name = \"ask\", kind = \"toy_asker\", replicas = 2, placement = \"w1\"),\n"
      << "(name = \"doubler\", kind = \"toy_doubler\", replicas = 2),\n"
      << "(name = \"learner\", kind = \"toy_learner\")],\n"
      << "edges = [(from = \"src.items\", to = \"ask.items\"),\n"
      << "(from = \"ask.items\", to = \"learner.items\"),\n"
      << "(from = \"learner.weights\", to = \"ask.weights\"),\n"
      << "(from = \"ask.double\", to = \"doubler.double\")],\n"
      << "schedule = (sync = void), run = (steps = 5, batchSize = 4, deadlineSeconds = 20));\n";
  int port = free_port() + 1;
  auto run = start("run '" + (dir / "served.capnp").string() + "' --quiet --listen 127.0.0.1:" +
                       std::to_string(port) + " --run-dir '" + (dir / "run").string() + "'",
                   "served-run");
  auto worker = start("worker --connect 127.0.0.1:" + std::to_string(port) +
                          " --name w1 --plugin '" + toy_plugin() + "'",
                      "served-worker");
  auto r = run.wait(std::chrono::seconds(60));
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_EQ(summary(dir / "run")["steps"], 5);
  // The learner summed the doubled numbers 0..19.
  const auto text = slurp(dir / "run" / "metrics.jsonl");
  const auto last = nlohmann::json::parse(text.substr(text.rfind('\n', text.size() - 2) + 1));
  EXPECT_EQ(last["metrics"]["total"], 380.0) << last.dump();
  // The driver counts the items it routed to each asker; the doubler's requests are the askers'.
  EXPECT_EQ(last["metrics"]["ask_replica_items/0"].get<double>() +
                last["metrics"]["ask_replica_items/1"].get<double>(),
            4.0)
      << last.dump();
  EXPECT_FALSE(last["metrics"].contains("doubler_replica_items/0")) << last.dump();
  EXPECT_EQ(worker.wait(std::chrono::seconds(30)).status, 0);
}

TEST(TwoProcesses, AKilledWorkerOfAStatefulKindFailsTheRunWithAClearError) {
  auto dir = scratch("killed");
  int port = free_port() + 1;
  auto run = start("run '" + toy_graph_on_worker(dir, 100000000).string() +
                       "' --quiet --listen 127.0.0.1:" + std::to_string(port) + " --run-dir '" +
                       (dir / "run").string() + "'",
                   "killed-run");
  auto worker = start("worker --connect 127.0.0.1:" + std::to_string(port) +
                          " --name w1 --plugin '" + toy_plugin() + "'",
                      "killed-worker");
  // Let the run get going, then kill the worker.
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!fs::exists(dir / "run" / "metrics.jsonl") ||
         slurp(dir / "run" / "metrics.jsonl").empty()) {
    ASSERT_LT(std::chrono::steady_clock::now(), until) << "the run never made a step";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(worker.pid(), SIGKILL);
  auto r = run.wait(std::chrono::seconds(60));
  ASSERT_EQ(r.status, 1) << r.err;
  // toy_stage keeps state a fresh replica would not have: no replacement is awaited
  // (test/recovery.test.cpp has a worker replaced).
  EXPECT_NE(
      r.err.find(
          "milesrt run: error: worker 'w1' went away (its process ended or its connection was "
          "lost); it hosted stage (kind toy_stage, replicas 0-1); stage (kind toy_stage) "
          "cannot be restarted"),
      std::string::npos)
      << r.err;
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  std::cout << "the run's error: " << r.err;
}

TEST(TwoProcesses, AMissingWorkerIsNamed) {
  auto dir = scratch("missing");
  auto g = toy_graph_on_worker(dir, 3);
  auto r = run_milesrt("run '" + g.string() +
                       "' --quiet --set run.workerWaitSeconds=0.5 --listen 127.0.0.1:" +
                       std::to_string(free_port() + 2));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("worker(s) w1 did not join within 0.5 s"), std::string::npos) << r.err;
  auto no_listen = run_milesrt("run '" + g.string() + "' --quiet");
  EXPECT_EQ(no_listen.status, 2);
  EXPECT_NE(no_listen.err.find("no --listen HOST:PORT was given"), std::string::npos)
      << no_listen.err;
}

}  // namespace
