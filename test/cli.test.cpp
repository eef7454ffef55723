// End to end: the milesrt executable's subcommands, exit statuses and error lines.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace {
namespace fs = std::filesystem;

struct result {
  int status = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path scratch() {
  fs::path d = fs::temp_directory_path() / ("milesrt-cli-" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

result milesrt(const std::string& args) {
  fs::path d = scratch();
  std::string cmd = std::string("cd '") + MILESRT_SOURCE_DIR + "' && '" + MILESRT_EXE + "' " + args +
                    " >'" + (d / "out").string() + "' 2>'" + (d / "err").string() + "'";
  int raw = std::system(cmd.c_str());
  result r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = slurp(d / "out");
  r.err = slurp(d / "err");
  return r;
}

size_t lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

TEST(Cli, VersionNamesTheComponents) {
  auto r = milesrt("--version");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("milesrt 0."), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("libtorch 2.11.0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CAF 0.17"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Cap'n Proto 0.9"), std::string::npos) << r.out;
}

TEST(Cli, HelpListsEverySubcommandAndEachHasHelp) {
  auto r = milesrt("--help");
  EXPECT_EQ(r.status, 0);
  for (const char* sub : {"run", "validate", "graph"}) {
    EXPECT_NE(r.out.find(sub), std::string::npos) << sub;
    auto h = milesrt(std::string(sub) + " --help");
    EXPECT_EQ(h.status, 0) << sub << ": " << h.err;
    EXPECT_NE(h.out.find("graph"), std::string::npos) << h.out;
  }
}

TEST(Cli, NoSubcommandIsBadInputWithOneLine) {
  auto r = milesrt("");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_EQ(r.err.rfind("milesrt: error: ", 0), 0u) << r.err;
}

TEST(Cli, UnknownSubcommandOrOptionIsBadInput) {
  auto r = milesrt("frobnicate");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  auto o = milesrt("validate graphs/grpo_sync.capnp --no-such-option");
  EXPECT_EQ(o.status, 2);
  EXPECT_EQ(lines(o.err), 1u) << o.err;
  EXPECT_NE(o.err.find("--no-such-option"), std::string::npos) << o.err;
}

TEST(Cli, ValidatesAndDrawsTheShippedGraph) {
  auto v = milesrt("validate graphs/grpo_sync.capnp");
  EXPECT_EQ(v.status, 0) << v.err;
  EXPECT_NE(v.out.find("graphs/grpo_sync.capnp: ok (6 actors, 6 edges, sync schedule"),
            std::string::npos) << v.out;
  auto d = milesrt("graph graphs/grpo_sync.capnp --dot");
  EXPECT_EQ(d.status, 0) << d.err;
  EXPECT_EQ(d.out.rfind("digraph \"grpo_sync\" {", 0), 0u) << d.out;
  EXPECT_NE(d.out.find("\"trainer\" -> \"publisher\""), std::string::npos) << d.out;
}

TEST(Cli, MissingGraphFileIsNamed) {
  auto r = milesrt("validate does/not/exist.capnp");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, "milesrt validate: error: does/not/exist.capnp: no such graph file\n");
}

TEST(Cli, SyntaxErrorGivesFileLineColumn) {
  fs::path f = scratch() / "broken.capnp";
  std::ofstream(f) << "@0xb1c2d3e4f5a6b7c8;\nusing import \"/milesrt/graph.capnp\".Graph;\n"
                      "const graph :Graph = (actors = [(name = \"a\", kind = )]);\n";
  auto r = milesrt("validate '" + f.string() + "'");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find(f.string() + ":3:"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.rfind("milesrt validate: error: ", 0), 0u) << r.err;
}

TEST(Cli, RunSaysPlainlyThatNothingStarted) {
  auto r = milesrt("run graphs/grpo_sync.capnp");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("nothing was started"), std::string::npos) << r.err;
}

}  // namespace
