// The HTTP server over real sockets on loopback: the Host header check (DNS rebinding) and the
// pause after a failed accept (no file descriptor left) instead of a spinning thread.
#include "runtime/http/http_server.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace milesrt::runtime {
namespace {

/// A socket (not yet connected) with a receive timeout; -1 on failure.
int new_socket() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

/// Connects `fd` to 127.0.0.1:`port`; false on failure.
bool connect_socket(int fd, uint16_t port) {
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(port);
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return ::connect(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0;
}

/// A connected socket to 127.0.0.1:`port`; -1 on failure.
int connect_to(uint16_t port) {
  int fd = new_socket();
  if (fd < 0) return -1;
  if (!connect_socket(fd, port)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

/// Sends `request` on `fd` and reads the answer until the server closes the connection.
std::string ask(int fd, const std::string& request) {
  if (::send(fd, request.data(), request.size(), 0) != static_cast<ssize_t>(request.size()))
    return "(send failed)";
  std::string answer;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) answer.append(buf, n);
  ::close(fd);
  return answer;
}

/// The status code of a GET / with these header lines ("" for none) over HTTP/`version`.
int status_of(uint16_t port, const std::string& headers, const std::string& version = "1.1") {
  int fd = connect_to(port);
  if (fd < 0) return -1;
  auto answer = ask(fd, "GET / HTTP/" + version + "\r\n" + headers + "Connection: close\r\n\r\n");
  if (answer.size() < 12) return -1;
  return std::stoi(answer.substr(9, 3));
}

TEST(HttpServer, AnswersOnlyRequestsNamingALoopbackHost) {
  http_server server(0);
  server.route("/", [](const std::string&) { return http_response{200, "text/plain", "hi\n"}; });
  server.start();
  const auto p = std::to_string(server.port());
  for (const auto& host : std::vector<std::string>{"localhost:" + p, "127.0.0.1:" + p, "[::1]:" + p,
                                                   "LocalHost:" + p}) {
    EXPECT_EQ(status_of(server.port(), "Host: " + host + "\r\n"), 200) << host;
  }
  for (const auto& host :
       std::vector<std::string>{"evil.example:" + p, "evil.example", "localhost", "localhost:1" + p,
                                "127.0.0.2:" + p, "0.0.0.0:" + p}) {
    EXPECT_EQ(status_of(server.port(), "Host: " + host + "\r\n"), 421) << host;
  }
  EXPECT_EQ(status_of(server.port(), ""), 400);         // HTTP/1.1 needs one
  EXPECT_EQ(status_of(server.port(), "", "1.0"), 200);  // HTTP/1.0 may leave it out
  int fd = connect_to(server.port());
  ASSERT_GE(fd, 0);
  auto answer =
      ask(fd, "GET / HTTP/1.1\r\nHost: rebound.example:" + p + "\r\nConnection: close\r\n\r\n");
  EXPECT_NE(
      answer.find("refused: Host 'rebound.example:" + p +
                  "' is not this server (expected localhost:" + p + " or 127.0.0.1:" + p + ")"),
      std::string::npos)
      << answer;
  EXPECT_EQ(answer.find("hi\n"), std::string::npos) << answer;
}

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

TEST(HttpServer, WaitsInsteadOfSpinningWhenNoDescriptorIsLeft) {
  http_server server(0);
  server.route("/", [](const std::string&) { return http_response{200, "text/plain", "hi\n"}; });
  server.start();
  int client = new_socket();  // made before the descriptors run out, connected after
  ASSERT_GE(client, 0);
  // Use up every descriptor the process may open, under a lowered soft limit.
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit low = old;
  low.rlim_cur = std::min<rlim_t>(old.rlim_cur, 4096);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> held;
  for (int fd; (fd = ::dup(client)) >= 0;) held.push_back(fd);
  // The connection waits in the backlog: every accept fails with EMFILE.
  ASSERT_TRUE(connect_socket(client, server.port()));
  const double before = cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const double used = cpu_seconds() - before;
  for (int fd : held) ::close(fd);
  ::setrlimit(RLIMIT_NOFILE, &old);
  EXPECT_LT(used, 0.5) << "the server's thread spun on a failing accept";
  // With descriptors back, the waiting connection is served (within the 1 s pause).
  auto answer = ask(client, "GET / HTTP/1.1\r\nHost: localhost:" + std::to_string(server.port()) +
                                "\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 200") << answer;
}

}  // namespace
}  // namespace milesrt::runtime
