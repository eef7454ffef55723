// The HTTP server over real sockets on loopback: the Host header check (DNS rebinding), the
// pause after a failed accept (no file descriptor left) instead of a spinning thread, methods and
// path parameters, bodies and their limit, the bearer secret, bad requests, and connections
// served side by side (a stalled client holds up no one).
#include "runtime/http/http_server.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "runtime/http/http_test_client.hpp"

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

namespace http = boost::beast::http;
using testing::http_call;
using verb = http::verb;

/// An answer of `body` as plain text.
http_response text(std::string body) { return http_response(200, "text/plain", std::move(body)); }

std::string host_line(uint16_t port) { return "Host: 127.0.0.1:" + std::to_string(port) + "\r\n"; }

/// True when the server closes `fd` (end of stream or reset) within its receive timeout; what
/// arrived before goes to `got`.
bool closed_by_server(int fd, std::string* got = nullptr) {
  char buf[4096];
  while (true) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      if (got) got->append(buf, n);
      continue;
    }
    return n == 0 || errno == ECONNRESET;
  }
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

TEST(HttpServer, RoutesByMethodAndPathParameters) {
  http_server server(0);
  server.route(http_method::post, "/sessions", [](const http_request& r) {
    return http_response(201, "application/json", "made:" + r.body);
  });
  server.route(http_method::get, "/sessions/{id}", [](const http_request& r) {
    return text("get " + r.param("id") + " q=" + r.query);
  });
  server.route(http_method::del, "/sessions/{id}",
               [](const http_request& r) { return text("del " + r.param("id")); });
  server.route(http_method::post, "/sessions/{id}/end", [](const http_request& r) {
    return text("end " + r.param("id") + " " + r.body + " " + r.header("Content-Type"));
  });
  server.start();
  const auto p = server.port();
  auto r = http_call(p, verb::post, "/sessions", "{}");
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(r.body, "made:{}");
  EXPECT_EQ(r.headers["content-type"], "application/json");
  EXPECT_EQ(http_call(p, verb::get, "/sessions/s%2D1?x=1").body, "get s-1 q=x=1");
  EXPECT_EQ(http_call(p, verb::delete_, "/sessions/s1").body, "del s1");
  r = http_call(p, verb::post, "/sessions/s1/end", "{\"score\":1}",
                {{"Content-Type", "application/json"}});
  EXPECT_EQ(r.body, "end s1 {\"score\":1} application/json");
  r = http_call(p, verb::head, "/sessions/s1");  // a GET route answers HEAD, without a body
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "");
  EXPECT_EQ(r.headers["content-length"], std::to_string(std::string("get s1 q=").size()));

  r = http_call(p, verb::put, "/sessions/s1");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.headers["allow"], "GET, HEAD, DELETE");
  EXPECT_EQ(r.body, "method PUT is not served at /sessions/s1 (allowed: GET, HEAD, DELETE)\n");
  r = http_call(p, verb::get, "/sessions/s1/end");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.headers["allow"], "POST");
  r = http_call(p, verb::get, "/nope");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, "no such page: /nope\n");
  r = http_call(p, verb::get, "/sessions/%zz");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body, "path parameter {id}: bad percent-encoding\n");

  testing::http_client one(p);  // one kept-alive connection, several requests
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(one.call(verb::get, "/sessions/k" + std::to_string(i)).body,
              "get k" + std::to_string(i) + " q=");
}

TEST(HttpServer, TakesBodiesUpToTheLimitAndAnswers413Past) {
  http_server_options o;
  o.body_limit = 1000;
  o.error_page = [](unsigned status, const std::string& message) {
    return http_response(status, "application/json", "{\"error\":\"" + message + "\"}");
  };
  http_server server(o);
  server.route(http_method::post, "/echo",
               [](const http_request& r) { return text(std::to_string(r.body.size())); });
  server.start();
  const auto p = server.port();
  EXPECT_EQ(http_call(p, verb::post, "/echo", std::string(1000, 'x')).body, "1000");
  auto r = http_call(p, verb::post, "/echo", std::string(1001, 'x'));
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(r.body, "{\"error\":\"request body over the limit of 1000 bytes\"}");
  EXPECT_EQ(r.headers["content-type"], "application/json");
  // A body of 3 MiB sent whole before the answer is read: still a 413, not a reset.
  r = http_call(p, verb::post, "/echo", std::string(3 << 20, 'x'));
  EXPECT_EQ(r.status, 413) << r.error;

  // Chunked bodies count the same.
  auto chunked = [&](const std::vector<size_t>& sizes) {
    std::string req = "POST /echo HTTP/1.1\r\n" + host_line(p) +
                      "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    for (size_t n : sizes) {
      char size[32];
      std::snprintf(size, sizeof size, "%zx\r\n", n);
      req += size + std::string(n, 'y') + "\r\n";
    }
    int fd = testing::raw_connect(p);
    testing::raw_send(fd, req + "0\r\n\r\n");
    auto answer = testing::raw_read_all(fd);
    ::close(fd);
    return answer;
  };
  auto answer = chunked({500, 500});
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 200") << answer;
  EXPECT_NE(answer.find("\r\n\r\n1000"), std::string::npos) << answer;
  answer = chunked({500, 500, 1});
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 413") << answer;

  // Expect: 100-continue is honoured, and a body past the limit is refused before it is sent.
  int fd = testing::raw_connect(p);
  testing::raw_send(fd, "POST /echo HTTP/1.1\r\n" + host_line(p) +
                            "Content-Length: 5\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_EQ(testing::raw_read_until(fd, "\r\n\r\n"), "HTTP/1.1 100 Continue\r\n\r\n");
  testing::raw_send(fd, "hello");
  answer = testing::raw_read_until(fd, "\r\n\r\n5");
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 200") << answer;
  ::close(fd);
  fd = testing::raw_connect(p);
  testing::raw_send(fd, "POST /echo HTTP/1.1\r\n" + host_line(p) +
                            "Content-Length: 5000\r\nExpect: 100-continue\r\n\r\n");
  answer = testing::raw_read_all(fd);
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 413") << answer;
  ::close(fd);
  EXPECT_EQ(http_call(p, verb::post, "/echo", "ok").body, "2");  // still serving
}

TEST(HttpServer, AStalledClientHoldsUpNoOne) {
  http_server_options o;
  o.read_timeout = std::chrono::milliseconds(1500);
  http_server server(o);
  server.route(http_method::post, "/echo", [](const http_request& r) { return text(r.body); });
  server.start();
  const auto p = server.port();
  // Half a request each, then nothing: a header and 3 of its 10 body bytes; half a header.
  int half_body = testing::raw_connect(p, 10), half_header = testing::raw_connect(p, 10);
  ASSERT_TRUE(testing::raw_send(
      half_body, "POST /echo HTTP/1.1\r\n" + host_line(p) + "Content-Length: 10\r\n\r\nabc"));
  ASSERT_TRUE(testing::raw_send(half_header, "POST /echo HTTP/1.1\r\nHo"));
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::future<int>> clients;
  for (int c = 0; c < 8; ++c) {
    clients.push_back(std::async(std::launch::async, [p, c] {
      testing::http_client client(p);
      int ok = 0;
      for (int i = 0; i < 5; ++i) {
        std::string body = std::to_string(c) + "/" + std::to_string(i);
        ok += client.call(verb::post, "/echo", body).body == body;
      }
      return ok;
    }));
  }
  for (auto& c : clients) EXPECT_EQ(c.get(), 5);
  EXPECT_LT(seconds_since(start), 1.0) << "the others waited for the stalled clients";
  // The stalled clients are closed at the read timeout, without an answer.
  std::string got;
  EXPECT_TRUE(closed_by_server(half_body, &got));
  EXPECT_TRUE(closed_by_server(half_header, &got));
  EXPECT_EQ(got, "");
  EXPECT_GT(seconds_since(start), 1.3);
  EXPECT_LT(seconds_since(start), 5.0);
  ::close(half_body);
  ::close(half_header);
}

TEST(HttpServer, ABearerSecretGuardsEveryRoute) {
  http_server_options o;
  o.bearer_secret = "s3cret";
  http_server server(o);
  server.route("/", [](const std::string&) { return text("hi"); });
  server.start();
  const auto p = server.port();
  auto r = http_call(p, verb::get, "/");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.headers["www-authenticate"], "Bearer");
  EXPECT_EQ(r.body, "refused: this server needs the header Authorization: Bearer <secret>\n");
  for (const char* wrong : {"Bearer s3cre", "Bearer s3cret2", "Basic s3cret", "s3cret", "Bearer"})
    EXPECT_EQ(http_call(p, verb::get, "/", "", {{"Authorization", wrong}}).status, 401) << wrong;
  EXPECT_EQ(http_call(p, verb::get, "/nope").status, 401);  // no route is told without it
  EXPECT_EQ(http_call(p, verb::get, "/", "", {{"Authorization", "Bearer s3cret"}}).body, "hi");
  EXPECT_EQ(http_call(p, verb::get, "/", "", {{"Authorization", "bearer  s3cret "}}).body, "hi");
  EXPECT_EQ(http_call(p, verb::get, "/nope", "", {{"Authorization", "Bearer s3cret"}}).status, 404);
}

TEST(HttpServer, AnAddressOtherThanLoopbackNeedsASecret) {
  auto refusal = [](http_server_options o) {
    try {
      http_server s(o);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("(listening)");
  };
  http_server_options o;
  o.address = "0.0.0.0";
  EXPECT_EQ(refusal(o),
            "cannot listen on 0.0.0.0:0: an address other than loopback needs a bearer secret "
            "(every request must then carry it)");
  o.address = "localhost";
  EXPECT_NE(refusal(o).find("cannot listen on localhost:0: not an IP address"), std::string::npos);
  o.address = "::1";  // loopback too (where the machine has IPv6 at all)
  EXPECT_EQ(refusal(o).find("needs a bearer secret"), std::string::npos);

  o.address = "0.0.0.0";
  o.bearer_secret = "k";
  o.host_names = {"Gpu7.Example"};
  http_server server(o);
  server.route("/", [](const std::string&) { return text("hi"); });
  server.start();
  const auto p = std::to_string(server.port());
  const std::pair<std::string, std::string> secret{"Authorization", "Bearer k"};
  // Reached over loopback: the loopback names and the extra name; nothing else.
  for (const auto& host : {"127.0.0.1:" + p, "localhost:" + p, "gpu7.example:" + p}) {
    auto r = http_call(server.port(), verb::get, "/", "", {secret, {"Host", host}});
    EXPECT_EQ(r.status, 200) << host;
  }
  auto r = http_call(server.port(), verb::get, "/", "", {secret, {"Host", "evil.example:" + p}});
  EXPECT_EQ(r.status, 421);
}

TEST(HttpServer, BadRequestsAreRefusedAndTheServerGoesOn) {
  http_server server(0);
  server.route("/", [](const std::string&) { return text("hi"); });
  server.start();
  const auto p = server.port();
  auto raw = [&](const std::string& bytes) {
    int fd = testing::raw_connect(p);
    testing::raw_send(fd, bytes);
    auto answer = testing::raw_read_all(fd);
    ::close(fd);
    return answer;
  };
  auto answer = raw("GARBAGE\r\n\r\n");
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 400") << answer;
  EXPECT_NE(answer.find("bad request: "), std::string::npos) << answer;
  answer =
      raw("GET / HTTP/1.1\r\n" + host_line(p) + "X-Big: " + std::string(20000, 'b') + "\r\n\r\n");
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 431") << answer;
  answer = raw("GET / HTTP/1.1\r\n" + host_line(p) + "Content-Length: x\r\n\r\n");
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 400") << answer;
  // Two requests in one send are answered in order.
  answer = raw("GET / HTTP/1.1\r\n" + host_line(p) + "\r\nGET /x HTTP/1.1\r\n" + host_line(p) +
               "Connection: close\r\n\r\n");
  auto second = answer.find("HTTP/1.1 404");
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 200") << answer;
  EXPECT_NE(second, std::string::npos) << answer;
  EXPECT_EQ(http_call(p, verb::get, "/").body, "hi");
}

TEST(HttpServer, RoutesThatThrowAreAnswered500) {
  http_server server(0);
  server.route(http_method::get, "/sync", [](const http_request&) -> http_response {
    throw std::runtime_error("sync broke");
  });
  server.route_async(http_method::get, "/async",
                     [](http_request, http_responder) { throw std::runtime_error("async broke"); });
  server.route(http_method::get, "/odd",
               [](const http_request&) { return http_response(7, "", ""); });
  server.start();
  auto r = http_call(server.port(), verb::get, "/sync");
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body, "sync broke\n");
  r = http_call(server.port(), verb::get, "/async");
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body, "async broke\n");
  r = http_call(server.port(), verb::get, "/odd");
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body, "the route answered status 7\n");
  EXPECT_THROW(server.route(http_method::get, "/late", nullptr), std::logic_error);
}

}  // namespace
}  // namespace milesrt::runtime
