#pragma once
/// `milesrt run --supervise`: the run in a child process, started again from the newest complete
/// checkpoint of its run directory each time it dies (a crash, kill -9, the OOM killer, or a run
/// that failed), up to a number of restarts.

#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include "runtime/cli/command.hpp"

namespace milesrt::cli {

struct supervise_request {
  /// The child's command line after the executable, less its run directory: `run GRAPH --set ...`.
  std::vector<std::string> args;
  /// Where the run writes; the child gets `--run-dir` (a fresh run) or `--resume` (a checkpoint).
  std::filesystem::path run_dir;
  /// The first child resumes (the user asked for `--resume`) rather than starting afresh.
  bool resume_first = false;
  /// How many times a dead child is replaced before the run fails.
  int max_restarts = 3;
};

/// Runs the child until it succeeds, fails on bad input (no restart mends that), or has died more
/// than `max_restarts` times; each event is one line on `err`. SIGINT, SIGTERM and SIGHUP are
/// passed on to the child and end the supervision.
exit_status supervise(const supervise_request& req, std::ostream& err);

}  // namespace milesrt::cli
