// End to end: the milesrt executable's subcommands, exit statuses and error lines.
#include "test/support.hpp"

namespace {
using namespace milesrt::testing;

TEST(Cli, VersionNamesTheComponents) {
  auto r = run_milesrt("--version");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("milesrt 0."), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("libtorch 2.11.0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CAF 0.17"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Cap'n Proto 0.9"), std::string::npos) << r.out;
}

TEST(Cli, HelpListsEverySubcommandAndEachHasHelp) {
  auto r = run_milesrt("--help");
  EXPECT_EQ(r.status, 0);
  for (const char* sub : {"run", "validate", "graph"}) {
    EXPECT_NE(r.out.find(sub), std::string::npos) << sub;
    auto h = run_milesrt(std::string(sub) + " --help");
    EXPECT_EQ(h.status, 0) << sub << ": " << h.err;
    EXPECT_NE(h.out.find("graph"), std::string::npos) << h.out;
  }
}

// MILESRT_INTRA_OP_THREADS sets libtorch's CPU threads on every actor thread (app/main.cpp): a
// value that is not a positive count stops the program before anything starts.
TEST(Cli, IntraOpThreadsMustBeAPositiveCount) {
  const auto dir = scratch("intra-op-threads");
  auto status_of = [&](const std::string& value) {
    const std::string cmd = "MILESRT_INTRA_OP_THREADS='" + value + "' '" + exe() +
                            "' --version >/dev/null 2>'" + (dir / "err").string() + "'";
    const int raw = std::system(cmd.c_str());
    return WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  };
  for (const char* bad : {"0", "-1", "two", "3x"}) {
    EXPECT_EQ(status_of(bad), 2) << bad;
    const auto err = slurp(dir / "err");
    EXPECT_NE(err.find("MILESRT_INTRA_OP_THREADS=" + std::string(bad)), std::string::npos) << err;
  }
  EXPECT_EQ(status_of("2"), 0) << slurp(dir / "err");
}

// `bench gemm` needs a GPU: without one it says so in one line and exits 2; with one it prints a
// JSON line per projection shape with each GEMM's time and row invariance.
TEST(Cli, BenchGemmRunsOnAGpuAndSaysSoWithoutOne) {
  auto r = run_milesrt("bench gemm --rows 1 --steps 1");
  if (r.status == 0) {
    EXPECT_EQ(lines(r.out), 5u) << r.out;
    EXPECT_NE(r.out.find("\"invariant_rows_equal_1\""), std::string::npos) << r.out;
    return;
  }
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("bench gemm: error: --device cuda: no CUDA device is visible"),
            std::string::npos)
      << r.err;
}

TEST(Cli, NoSubcommandIsBadInputWithOneLine) {
  auto r = run_milesrt("");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_EQ(r.err.rfind("milesrt: error: ", 0), 0u) << r.err;
}

TEST(Cli, UnknownSubcommandOrOptionIsBadInput) {
  auto r = run_milesrt("frobnicate");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  auto o = run_milesrt("validate examples/toy/toy_sync.capnp --no-such-option");
  EXPECT_EQ(o.status, 2);
  EXPECT_EQ(lines(o.err), 1u) << o.err;
  EXPECT_NE(o.err.find("--no-such-option"), std::string::npos) << o.err;
}

TEST(Cli, ValidatesAndDrawsTheToyGraphs) {
  for (const char* g : {"examples/toy/toy_sync.capnp", "examples/toy/toy_async.capnp"}) {
    auto v = run_milesrt(std::string("validate ") + g);
    EXPECT_EQ(v.status, 0) << v.err;
    EXPECT_NE(v.out.find(std::string(g) + ": ok (3 actors, 3 edges, "), std::string::npos) << v.out;
    auto d = run_milesrt(std::string("graph --dot ") + g);
    EXPECT_EQ(d.status, 0) << d.err;
    EXPECT_NE(d.out.find("\"learner\" -> \"stage\" [label=\"weights -> weights\"]"),
              std::string::npos)
        << d.out;
  }
}

TEST(Cli, DrawsTheShippedGraphs) {
  auto d = run_milesrt("graph graphs/grpo_sync.capnp --dot");
  EXPECT_EQ(d.status, 0) << d.err;
  EXPECT_EQ(d.out.rfind("digraph \"grpo_sync\" {", 0), 0u) << d.out;
  EXPECT_NE(d.out.find("\"trainer\" -> \"publisher\""), std::string::npos) << d.out;
}

TEST(Cli, MissingGraphFileIsNamed) {
  auto r = run_milesrt("validate does/not/exist.capnp");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, "milesrt validate: error: does/not/exist.capnp: no such graph file\n");
}

TEST(Cli, SyntaxErrorGivesFileLineColumn) {
  fs::path f = scratch("syntax") / "broken.capnp";
  std::ofstream(f) << "@0xb1c2d3e4f5a6b7c8;\nusing import \"/milesrt/graph.capnp\".Graph;\n"
                      "const graph :Graph = (actors = [(name = \"a\", kind = )]);\n";
  auto r = run_milesrt("validate '" + f.string() + "'");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find(f.string() + ":3:"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.rfind("milesrt validate: error: ", 0), 0u) << r.err;
}

// Two members of one union (the compiler would keep the last, async, without a word): validate
// refuses the graph with file:line:col naming the union and both fields, exit 2.
TEST(Cli, TwoMembersOfOneUnionAreRefused) {
  std::string text = slurp(fs::path(source_dir()) / "graphs/grpo_sync.capnp");
  const std::string sync = "schedule = (sync = void)";
  ASSERT_NE(text.find(sync), std::string::npos);
  text.replace(text.find(sync), sync.size(),
               "schedule = (sync = void, async = (maxStaleness = 1))");
  fs::path graph = scratch("two-members") / "two.capnp";
  std::ofstream(graph) << text;
  auto r = run_milesrt("validate '" + graph.string() + "'");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find(graph.string() + ":36:28: schedule: 'sync' and 'async' are members of one "
                                        "union (Cap'n Proto would keep only the last); set one "
                                        "of them"),
            std::string::npos)
      << r.err;
}

TEST(Cli, UnknownKindsAreRefusedBeforeAnythingStarts) {
  // The default GRPO graph with its reward actor's kind misspelt.
  std::string text = slurp(fs::path(source_dir()) / "graphs/grpo_sync.capnp");
  const std::string good = "kind = \"math_reward\"";
  ASSERT_NE(text.find(good), std::string::npos);
  text.replace(text.find(good), good.size(), "kind = \"reward\"");
  fs::path graph = scratch("unknown-kind") / "bad.capnp";
  std::ofstream(graph) << text;
  auto r = run_milesrt("run '" + graph.string() + "' --run-dir /nonexistent/never-created");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(
      r.err.find("bad.capnp: actor 'reward': field 'kind': unknown actor kind 'reward' (known: "),
      std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("math_reward"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists("/nonexistent/never-created"));
}

// Colocated publishing needs its trainer and engine in one process: a rollout placed on a worker
// is refused by validation (exit 2, naming both actors and placements), before any actor starts.
TEST(Cli, ColocatedPublishingAcrossProcessesIsRefusedByValidation) {
  auto r = run_milesrt("validate graphs/grpo_sync.capnp --set rollout.placement=w1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("grpo_sync.capnp: actor 'publisher': params.publisher.transport: colocated "
                       "hands the weights over inside one process, but actor 'rollout' (rollout) "
                       "is placed on worker 'w1' and the publisher on the driver's process"),
            std::string::npos)
      << r.err;
  // Across processes another transport is accepted (only the placement problem is looked for:
  // the model folders the graph names may not exist where the test runs).
  auto ipc = run_milesrt(
      "validate graphs/grpo_sync.capnp --set rollout.placement=w1 --set publisher.transport=ipc");
  EXPECT_EQ(ipc.err.find("hands the weights over inside one process"), std::string::npos)
      << ipc.err;
}

}  // namespace
