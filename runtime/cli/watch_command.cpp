// `milesrt watch RUN_DIR`: the live page of a run directory, for a run that is going on in another
// process or one that ended: the graph and its actors from RUN_DIR/live.json, the charts from
// RUN_DIR/metrics.jsonl, both read again as they grow.
#include <CLI/CLI.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <ostream>
#include <sstream>

#include "runtime/cli/command.hpp"
#include "runtime/core/untrusted_text.hpp"
#include "runtime/http/http_server.hpp"
#include "runtime/metrics/metrics_writer.hpp"
#include "runtime/metrics/page_data.hpp"

namespace milesrt::cli {
namespace fs = std::filesystem;

namespace {

/// metrics.jsonl read incrementally: complete lines only, each parsed once.
class steps_file {
 public:
  explicit steps_file(fs::path file) : file_(std::move(file)) {}

  nlohmann::json since(uint64_t step) {
    std::lock_guard<std::mutex> lock(mutex_);
    read_new_lines();
    nlohmann::json out = nlohmann::json::array();
    for (const auto& s : steps_)
      if (s["step"].get<uint64_t>() > step) out.push_back(s);
    return out;
  }

 private:
  void read_new_lines() {
    std::ifstream in(file_, std::ios::binary);
    if (!in) return;
    in.seekg(0, std::ios::end);
    auto size = static_cast<uint64_t>(in.tellg());
    if (size < offset_) {  // a new run in the same folder: start over
      offset_ = 0;
      steps_.clear();
    }
    in.seekg(static_cast<std::streamoff>(offset_));
    std::string line;
    while (std::getline(in, line)) {
      if (in.eof()) break;  // a line still being written
      offset_ += line.size() + 1;
      if (line.empty() || !runtime::json_nesting_problem(line).empty()) continue;
      try {
        auto rec = runtime::step_record_from_json(nlohmann::json::parse(line));
        // A resumed run repeats steps after its checkpoint: the newest line of a step wins.
        while (!steps_.empty() && steps_.back()["step"].get<uint64_t>() >= rec.step)
          steps_.pop_back();
        steps_.push_back(runtime::to_json(runtime::to_frame(rec, 0)));
      } catch (const std::exception&) {
        // A line that is not a step record is skipped, like a torn one.
      }
    }
  }

  fs::path file_;
  std::mutex mutex_;
  uint64_t offset_ = 0;
  std::vector<nlohmann::json> steps_;
};

nlohmann::json read_live(const fs::path& dir) {
  nlohmann::json j;
  try {
    std::ifstream in(dir / "live.json");
    std::stringstream text;
    if (in) text << in.rdbuf();
    // The page dumps what it read: a value nested deeper than that would overflow the stack.
    if (runtime::json_nesting_problem(text.str()).empty()) j = nlohmann::json::parse(text.str());
  } catch (const std::exception&) {
  }
  if (!j.is_object())
    j = {{"state", "unknown"},
         {"actors", nlohmann::json::array()},
         {"edges", nlohmann::json::array()},
         {"charts", nlohmann::json::array()}};
  // A run that ended without its final live view (killed): summary.json says how it ended.
  try {
    std::ifstream in(dir / "summary.json");
    if (in && j.value("state", "") == "running") {
      auto s = nlohmann::json::parse(in);
      j["state"] = s.value("ok", false) ? "finished" : "failed";
    }
  } catch (const std::exception&) {
  }
  j["source"] = "watch";
  j["run_dir"] = dir.string();
  return j;
}

}  // namespace

namespace {

struct watch_options {
  std::string dir;
  int port = 0;
};

exit_status watch_command(const watch_options& opt, context& ctx) {
  const fs::path dir = opt.dir;
  if (!fs::is_directory(dir)) {
    print_error(ctx.err, "watch", opt.dir + ": no such run directory");
    return exit_status::bad_input;
  }
  if (!fs::exists(dir / "metrics.jsonl") && !fs::exists(dir / "live.json")) {
    print_error(ctx.err, "watch",
                opt.dir + ": neither metrics.jsonl nor live.json (not a run directory)");
    return exit_status::bad_input;
  }
  // SIGINT and SIGTERM are waited for below: block them before the server's thread starts.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  std::unique_ptr<runtime::http_server> server;
  auto steps = std::make_shared<steps_file>(dir / "metrics.jsonl");
  try {
    server = std::make_unique<runtime::http_server>(static_cast<uint16_t>(opt.port));
    runtime::page_source source;
    source.live = [dir] { return read_live(dir); };
    source.steps = [steps](uint64_t since) { return steps->since(since); };
    runtime::add_page_routes(*server, source);
    server->start();
  } catch (const std::exception& e) {
    print_error(ctx.err, "watch", e.what());
    return exit_status::bad_input;
  }
  ctx.out << "milesrt watch: live page of " << dir.string()
          << " at http://127.0.0.1:" << server->port() << "/ (Ctrl-C stops)" << std::endl;
  int sig = 0;
  sigwait(&stop, &sig);
  return exit_status::ok;
}

}  // namespace

command make_watch_command() {
  return {"watch", "Serve the live page of a run directory (a run going on, or one that ended)",
          [](CLI::App& app, context& ctx) -> runner {
            auto opt = std::make_shared<watch_options>();
            app.add_option("run_dir", opt->dir, "Run directory (with metrics.jsonl and live.json)")
                ->required();
            app.add_option("--port", opt->port, "Loopback port of the page (0: a free one)")
                ->check(CLI::Range(0, 65535));
            return [opt, &ctx] { return watch_command(*opt, ctx); };
          }};
}

}  // namespace milesrt::cli
