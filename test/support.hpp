#pragma once
// Running the real milesrt executable from the tests.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace milesrt::testing {
namespace fs = std::filesystem;

struct result {
  int status = -1;
  std::string out, err;
};

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline fs::path scratch(const std::string& name) {
  fs::path d =
      fs::temp_directory_path() / ("milesrt-e2e-" + std::to_string(::getpid()) + "-" + name);
  fs::create_directories(d);
  return d;
}

inline std::string exe() { return MILESRT_EXE; }
inline std::string source_dir() { return MILESRT_SOURCE_DIR; }

/// The toy kinds' plugin (examples/toy), as the executable's build puts it.
inline std::string toy_plugin() {
  return fs::path(exe()).parent_path().string() + "/plugins/libmilesrt_toy.so";
}

/// examples/toy/toy_sync.capnp with its stage (`kind`, two replicas, `params` if any) placed on the
/// worker "w1" and run for `steps` steps, written to dir/placed.capnp.
inline fs::path toy_graph_on_worker(const fs::path& dir, int steps,
                                    const std::string& kind = "toy_stage",
                                    const std::string& params = "") {
  std::string text = slurp(fs::path(source_dir()) / "examples/toy/toy_sync.capnp");
  const std::string stage = "kind = \"toy_stage\", replicas = 2";
  text.replace(text.find(stage), stage.size(),
               "kind = \"" + kind + "\", replicas = 2, placement = \"w1\"" +
                   (params.empty() ? "" : ", params = " + params));
  text.replace(text.find("steps = 5"), 9, "steps = " + std::to_string(steps));
  auto g = dir / "placed.capnp";
  std::ofstream(g) << text;
  return g;
}

/// Runs `milesrt ARGS` in the source folder and waits for it.
inline result run_milesrt(const std::string& args, const std::string& tag = "cmd") {
  fs::path d = scratch(tag);
  std::string cmd = "cd '" + source_dir() + "' && '" + exe() + "' " + args + " >'" +
                    (d / "out").string() + "' 2>'" + (d / "err").string() + "'";
  int raw = std::system(cmd.c_str());
  result r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = slurp(d / "out");
  r.err = slurp(d / "err");
  return r;
}

/// A milesrt process in the background: its pid, and its exit status once it ends.
struct background {
  fs::path dir;
  pid_t pid() const { return static_cast<pid_t>(std::stol(slurp(dir / "pid"))); }
  bool ended() const { return fs::exists(dir / "rc") && !slurp(dir / "rc").empty(); }
  /// Waits up to `limit` for the process to end; its result, or status -1 when it did not end (it
  /// is then killed, so that a hang fails the test now with its output instead of holding the
  /// test runner's pipe open until ctest's timeout).
  result wait(std::chrono::seconds limit) const {
    auto until = std::chrono::steady_clock::now() + limit;
    while (!ended() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    result r;
    if (!ended()) {
      ::kill(pid(), SIGKILL);
      r.err = "(still running after " + std::to_string(limit.count()) + " s: killed)\n";
    }
    if (ended()) r.status = std::stoi(slurp(dir / "rc"));
    r.out = slurp(dir / "out");
    r.err += slurp(dir / "err");
    return r;
  }
};

inline background start(const std::string& args, const std::string& tag) {
  background b{scratch(tag)};
  std::string cmd = "cd '" + source_dir() + "' && (sh -c 'echo $$ > \"" + (b.dir / "pid").string() +
                    "\"; exec \"" + exe() + "\" " + args + "' >'" + (b.dir / "out").string() +
                    "' 2>'" + (b.dir / "err").string() + "'; echo $? > '" +
                    (b.dir / "rc").string() + "') &";
  std::system(cmd.c_str());
  while (!fs::exists(b.dir / "pid") || slurp(b.dir / "pid").empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return b;
}

inline size_t lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace milesrt::testing
