#pragma once
/// For tests: runs a function as several ranks, each in a child process forked from the test
/// (one intra-op thread each, as on a shared 2-core machine), and collects what each reported.

#include <ATen/Parallel.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace milesrt::dist::testing {

/// A TCP port that was free a moment ago (the kernel's pick for port 0).
inline uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

/// Forks one child per rank in `ranks`; each runs `body(rank)` and reports the string it returns
/// ("" = fine) or the exception it threw. Returns the reports in the order of `ranks`; a child
/// that crashed or ran past `seconds` reports how it ended.
inline std::vector<std::string> run_ranks(const std::vector<int>& ranks,
                                          const std::function<std::string(int)>& body,
                                          unsigned seconds = 60) {
  std::vector<pid_t> pids;
  std::vector<int> fds;
  for (int rank : ranks) {
    int p[2];
    if (::pipe(p) != 0) return {"pipe failed"};
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(p[0]);
      ::alarm(seconds);
      at::set_num_threads(1);
      std::string out;
      try {
        out = body(rank);
      } catch (const std::exception& e) {
        out = std::string("threw: ") + e.what();
      }
      if (!out.empty() && ::write(p[1], out.data(), out.size()) < 0) ::_exit(3);
      ::_exit(out.empty() ? 0 : 1);
    }
    ::close(p[1]);
    pids.push_back(pid);
    fds.push_back(p[0]);
  }
  std::vector<std::string> reports;
  for (size_t i = 0; i < pids.size(); ++i) {
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fds[i], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    ::close(fds[i]);
    int status = 0;
    ::waitpid(pids[i], &status, 0);
    if (WIFSIGNALED(status))
      out = "rank " + std::to_string(ranks[i]) + " died of signal " +
            std::to_string(WTERMSIG(status)) + (out.empty() ? "" : ": " + out);
    reports.push_back(out);
  }
  return reports;
}

}  // namespace milesrt::dist::testing
