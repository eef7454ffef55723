#pragma once
/// For the HTTP server's tests: a real client (Boost.Beast, blocking) and raw sockets, on
/// loopback.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace milesrt::runtime::testing {

/// An answer as a client saw it.
struct http_reply {
  int status = -1;  ///< -1: no answer (the connection failed or closed)
  std::string body;
  std::map<std::string, std::string> headers;  ///< names in lower case
  std::string error;                           ///< why there was no answer
};

/// One client connection (keep-alive: several requests in a row), with a 10 s timeout per call.
class http_client {
 public:
  explicit http_client(uint16_t port) : port_(port), stream_(io_) {
    boost::beast::error_code ec;
    stream_.expires_after(std::chrono::seconds(10));
    stream_.connect({boost::asio::ip::make_address("127.0.0.1"), port}, ec);
    if (ec) error_ = ec.message();
  }

  http_reply call(boost::beast::http::verb method, const std::string& target,
                  const std::string& body = "",
                  const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    namespace http = boost::beast::http;
    http_reply out;
    if (!error_.empty()) {
      out.error = error_;
      return out;
    }
    http::request<http::string_body> req{method, target, 11};
    req.set(http::field::host, "127.0.0.1:" + std::to_string(port_));
    for (const auto& [n, v] : headers) req.set(n, v);
    if (method != http::verb::get || !body.empty()) {
      req.body() = body;
      req.prepare_payload();
    }
    boost::beast::error_code ec;
    stream_.expires_after(std::chrono::seconds(10));
    http::write(stream_, req, ec);
    if (ec) {
      out.error = "write: " + ec.message();
      return out;
    }
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 << 20);
    if (method == http::verb::head) parser.skip(true);
    http::read(stream_, buffer_, parser, ec);
    if (ec) {
      out.error = "read: " + ec.message();
      return out;
    }
    auto res = parser.release();
    out.status = static_cast<int>(res.result_int());
    out.body = res.body();
    for (const auto& f : res) {
      std::string name(f.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      out.headers[name] = std::string(f.value());
    }
    return out;
  }

 private:
  uint16_t port_;
  boost::asio::io_context io_;
  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  std::string error_;
};

/// One request on a connection of its own.
inline http_reply http_call(uint16_t port, boost::beast::http::verb method,
                            const std::string& target, const std::string& body = "",
                            const std::vector<std::pair<std::string, std::string>>& headers = {}) {
  return http_client(port).call(method, target, body, headers);
}

/// A raw socket connected to 127.0.0.1:`port` with a receive timeout of `timeout_s`; -1 on
/// failure.
inline int raw_connect(uint16_t port, int timeout_s = 5) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  timeval tv{timeout_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(port);
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline bool raw_send(int fd, const std::string& bytes) {
  return ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

/// Reads until the server closes the connection (or the receive timeout).
inline std::string raw_read_all(int fd) {
  std::string answer;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) answer.append(buf, n);
  return answer;
}

/// Reads until `marker` has arrived (or the connection ends, or the receive timeout).
inline std::string raw_read_until(int fd, const std::string& marker) {
  std::string answer;
  char buf[4096];
  while (answer.find(marker) == std::string::npos) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    answer.append(buf, n);
  }
  return answer;
}

}  // namespace milesrt::runtime::testing
