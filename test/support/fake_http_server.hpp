#pragma once
// A fake HTTP server on loopback for the tests, on raw sockets so that it can answer anything:
// well-formed answers, bytes that are no HTTP, a body cut short, an answer after the client's
// timeout. Each connection is served on a thread of its own; each request is answered by the
// test's function with the bytes to send.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace milesrt::testing {

/// What the server sends for one request.
struct fake_answer {
  std::string bytes;                   ///< status line, headers and body, as sent
  std::chrono::milliseconds delay{0};  ///< waited before sending; then the connection closes
  static fake_answer http(int status, const std::string& body,
                          const std::string& type = "application/json") {
    return {"HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: " + type +
                "\r\nContent-Length: " + std::to_string(body.size()) +
                "\r\nConnection: close\r\n\r\n" + body,
            std::chrono::milliseconds(0)};
  }
};

/// One request as the fake server read it.
struct fake_request {
  std::string method, target, body;
};

class fake_http_server {
 public:
  using handler = std::function<fake_answer(const fake_request&)>;

  explicit fake_http_server(handler h) : handler_(std::move(h)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof at;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 || ::listen(fd_, 64) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&at), &len) != 0) {
      ::close(fd_);
      fd_ = -1;
      return;
    }
    port_ = ntohs(at.sin_port);
    accepter_ = std::thread([this] { accept_loop(); });
  }

  ~fake_http_server() {
    stop_ = true;
    if (accepter_.joinable()) accepter_.join();
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& t : connections_) t.join();
    if (fd_ >= 0) ::close(fd_);
  }
  fake_http_server(const fake_http_server&) = delete;
  fake_http_server& operator=(const fake_http_server&) = delete;

  uint16_t port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  /// The requests read so far.
  size_t requests() const { return requests_; }

 private:
  void accept_loop() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      std::lock_guard<std::mutex> lock(mu_);
      connections_.emplace_back([this, c] { serve(c); });
    }
  }

  /// Reads one request (its header, then Content-Length bytes of body); false when the client
  /// went or sent something else.
  bool read_request(int c, fake_request& out) {
    std::string in;
    char buf[65536];
    size_t head_end = std::string::npos;
    size_t need = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!stop_ && std::chrono::steady_clock::now() < until) {
      if (head_end == std::string::npos && (head_end = in.find("\r\n\r\n")) != std::string::npos) {
        const std::string head = in.substr(0, head_end);
        const auto cl = head.find("Content-Length: ");
        need = cl == std::string::npos ? 0 : std::stoul(head.substr(cl + 16));
        const auto sp = head.find(' ');
        out.method = head.substr(0, sp);
        out.target = head.substr(sp + 1, head.find(' ', sp + 1) - sp - 1);
      }
      if (head_end != std::string::npos && in.size() >= head_end + 4 + need) {
        out.body = in.substr(head_end + 4, need);
        return true;
      }
      pollfd p{c, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) return false;
      in.append(buf, static_cast<size_t>(n));
    }
    return false;
  }

  void serve(int c) {
    fake_request req;
    if (read_request(c, req)) {
      ++requests_;
      const fake_answer a = handler_(req);
      const auto until = std::chrono::steady_clock::now() + a.delay;
      while (!stop_ && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (!stop_) ::send(c, a.bytes.data(), a.bytes.size(), MSG_NOSIGNAL);
    }
    ::shutdown(c, SHUT_WR);
    ::close(c);
  }

  handler handler_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> requests_{0};
  std::thread accepter_;
  std::mutex mu_;
  std::vector<std::thread> connections_;
};

}  // namespace milesrt::testing
