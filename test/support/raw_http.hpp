#pragma once
// One HTTP exchange over a raw socket for the fuzz tests: any bytes go out, and what comes back is
// read as one HTTP/1.x answer (a status line, header fields, a body by Content-Length or chunked)
// and judged well-formed or not, without trusting it to be either.
#include <sys/socket.h>
#include <sys/time.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <regex>
#include <string>

#include "runtime/http/http_test_client.hpp"

namespace milesrt::testing {

/// An answer as it arrived on a raw socket.
struct raw_reply {
  std::string bytes;      ///< everything that arrived
  bool closed = false;    ///< the server closed (or reset) the connection
  bool complete = false;  ///< one whole answer arrived
  int status = -1;        ///< the final status (after any 100 Continue)
  std::string head;       ///< its status line and header fields, names in lower case
  std::string body;       ///< its body, de-chunked
  std::string problem;  ///< why the bytes are no HTTP answer; "" when they are (or may become) one
};

/// The value of header field `name` (lower case) in `head`; "" when absent.
inline std::string header_value(const std::string& head, const std::string& name) {
  const auto at = head.find("\r\n" + name + ":");
  if (at == std::string::npos) return "";
  auto from = at + name.size() + 3;
  while (from < head.size() && head[from] == ' ') ++from;
  return head.substr(from, head.find("\r\n", from) - from);
}

/// `s` cut to 300 bytes with unprintable bytes as \xNN: safe in a failure message.
inline std::string printable(const std::string& s, size_t n = 300) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (std::isprint(c)) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    }
  }
  return s.size() > n ? out + "... (" + std::to_string(s.size()) + " bytes)" : out;
}

/// De-chunks `in` from `at`; true when the last chunk and the trailer's end arrived.
inline bool dechunk(const std::string& in, size_t at, std::string& body, std::string& problem) {
  body.clear();
  for (;;) {
    const auto eol = in.find("\r\n", at);
    if (eol == std::string::npos) return false;
    const std::string line = in.substr(at, in.find_first_of(";\r", at) - at);
    if (line.empty() || line.size() > 16 ||
        line.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
      problem = "a bad chunk size line '" + printable(line) + "'";
      return false;
    }
    const size_t n = std::stoull(line, nullptr, 16);
    at = eol + 2;
    if (n == 0) return in.find("\r\n\r\n", at - 2) != std::string::npos;
    if (in.size() < at + n + 2) return false;
    body.append(in, at, n);
    at += n + 2;
  }
}

/// Reads `r.bytes` as one answer (to a HEAD request when `head_request`: no body).
inline void parse_reply(raw_reply& r, bool head_request) {
  static const std::regex status_line(R"(^HTTP/1\.[01] ([1-5][0-9][0-9]) [^\r\n]*)");
  size_t at = 0;
  for (;;) {
    const auto end = r.bytes.find("\r\n\r\n", at);
    if (end == std::string::npos) return;
    std::string head = r.bytes.substr(at, end - at + 2);
    std::smatch m;
    if (!std::regex_search(head, m, status_line)) {
      r.problem = "not an HTTP status line: '" + printable(head.substr(0, 80)) + "'";
      return;
    }
    for (size_t i = head.find("\r\n"); i < head.size() && i != std::string::npos;) {
      const auto colon = head.find(':', i);
      for (size_t k = i; k < colon && k < head.size(); ++k)
        head[k] = static_cast<char>(std::tolower(static_cast<unsigned char>(head[k])));
      i = head.find("\r\n", i + 2);
    }
    r.status = std::stoi(m[1]);
    r.head = head;
    at = end + 4;
    if (r.status != 100) break;
  }
  const std::string length = header_value(r.head, "content-length");
  if (head_request || r.status == 204 || r.status == 304) {
    r.complete = true;
  } else if (!length.empty()) {
    const size_t n = std::stoull(length);
    if (r.bytes.size() >= at + n) {
      r.body = r.bytes.substr(at, n);
      r.complete = true;
    }
  } else if (header_value(r.head, "transfer-encoding") == "chunked") {
    r.complete = dechunk(r.bytes, at, r.body, r.problem);
  } else if (r.closed) {
    r.body = r.bytes.substr(at);
    r.complete = true;
  }
}

/// Sends `request` to 127.0.0.1:`port` (then shuts down the sending side when `half_close`)
/// and reads one answer until it is whole, the server closes, or `limit` passes.
inline raw_reply raw_exchange(uint16_t port, const std::string& request, bool half_close,
                              bool head_request, std::chrono::milliseconds limit) {
  raw_reply r;
  const int fd = runtime::testing::raw_connect(port, 1);
  if (fd < 0) {
    r.problem = "cannot connect to port " + std::to_string(port);
    return r;
  }
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  runtime::testing::raw_send(fd, request);  // the server may refuse before it has read it all
  if (half_close) ::shutdown(fd, SHUT_WR);
  const auto until = std::chrono::steady_clock::now() + limit;
  char buf[65536];
  while (!r.complete && r.problem.empty() && std::chrono::steady_clock::now() < until) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      r.bytes.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      r.closed = true;
    }
    parse_reply(r, head_request);
    if (r.closed) break;
  }
  ::close(fd);
  return r;
}

}  // namespace milesrt::testing
