#include "runtime/cli/supervisor.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <ostream>

#include "runtime/checkpoint/checkpoint.hpp"

namespace milesrt::cli {
namespace {
namespace fs = std::filesystem;

// A signal handler can reach nothing else: the child to pass signals to, and whether one came.
volatile sig_atomic_t g_child = 0;
volatile sig_atomic_t g_stop_signal = 0;

void forward_signal(int sig) {
  g_stop_signal = sig;
  if (g_child > 0) ::kill(static_cast<pid_t>(g_child), sig);
}

/// This executable, for the child (the same binary, whatever PATH says).
std::string self_exe() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("--supervise: cannot find this executable: " + ec.message());
  return p.string();
}

/// Starts the child; its pid.
pid_t start_child(const std::string& exe, const std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0)
    throw std::runtime_error(std::string("--supervise: cannot start the run process: ") +
                             std::strerror(errno));
  if (pid == 0) {
    ::execv(exe.c_str(), argv.data());
    std::fprintf(stderr, "milesrt run: error: cannot run %s: %s\n", exe.c_str(),
                 std::strerror(errno));
    ::_exit(static_cast<int>(exit_status::run_failed));
  }
  return pid;
}

/// How a child ended, in words: "exited with status 1", "was killed by signal 9 (Killed)".
std::string describe_end(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + ::strsignal(sig) + ")";
  }
  return "ended with wait status " + std::to_string(status);
}

int wait_child(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR)
      throw std::runtime_error(std::string("--supervise: waitpid: ") + std::strerror(errno));
  }
  return status;
}

}  // namespace

exit_status supervise(const supervise_request& req, std::ostream& err) {
  const std::string exe = self_exe();
  struct sigaction sa {};
  sa.sa_handler = forward_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);

  bool resume = req.resume_first;
  for (int attempt = 0;; ++attempt) {
    std::vector<std::string> args = req.args;
    args.push_back(resume ? "--resume" : "--run-dir");
    args.push_back(req.run_dir.string());
    pid_t pid = start_child(exe, args);
    g_child = pid;
    err << "milesrt run: run process " << pid << " started"
        << (attempt == 0 ? ""
                         : " (restart " + std::to_string(attempt) + " of " +
                               std::to_string(req.max_restarts) + ")")
        << std::endl;
    int status = wait_child(pid);
    g_child = 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == static_cast<int>(exit_status::ok))
      return exit_status::ok;
    const std::string how = "the run process " + std::to_string(pid) + " " + describe_end(status);
    if (g_stop_signal != 0) {
      print_error(err, "run",
                  how + " after this supervisor was sent signal " + std::to_string(g_stop_signal) +
                      " (" + ::strsignal(g_stop_signal) + "); not restarted");
      return exit_status::run_failed;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == static_cast<int>(exit_status::bad_input)) {
      // Its own error line says what was wrong; starting it again would not change that.
      return exit_status::bad_input;
    }
    if (attempt >= req.max_restarts) {
      print_error(err, "run",
                  how + "; gave up after " + std::to_string(req.max_restarts) +
                      " restart(s) (--max-restarts " + std::to_string(req.max_restarts) + ")");
      return exit_status::run_failed;
    }
    auto latest = runtime::latest_checkpoint(req.run_dir);
    resume = latest.has_value();
    err << "milesrt run: " << how << "; restarting "
        << (latest ? "from checkpoint " + latest->string()
                   : "from the beginning (no complete checkpoint yet)")
        << std::endl;
  }
}

}  // namespace milesrt::cli
