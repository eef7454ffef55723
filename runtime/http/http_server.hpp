#pragma once
/// One small HTTP/1.1 server on the loopback interface (Boost.Beast), with its own thread: the
/// Prometheus endpoint and the live page share it, and later servers (a session API) can add
/// their routes to it. Only GET; a route answers with a status, a content type and a body.
/// A request whose Host header names neither localhost, 127.0.0.1 nor [::1] with the server's port
/// is answered 421 (400 without one in HTTP/1.1): a page of another site whose name was rebound to
/// 127.0.0.1 cannot read it. A failed accept (no file descriptor left) is retried after a pause
/// that doubles up to 1 s.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace milesrt::runtime {

struct http_response {
  unsigned status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

/// Answers a GET of a path; `query` is what follows '?' ("" when none). Called on the server's
/// thread, so it must guard what it shares.
using http_handler = std::function<http_response(const std::string& query)>;

class http_server {
 public:
  /// Binds 127.0.0.1:`port` (0: a free port) at once; throws std::runtime_error
  /// "cannot listen on 127.0.0.1:PORT: <reason>" when it cannot (a port in use, say).
  explicit http_server(uint16_t port);
  ~http_server();
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  /// Adds a route (exact path match); only before start().
  void route(const std::string& path, http_handler handler);
  /// Starts serving on the server's thread.
  void start();
  uint16_t port() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace milesrt::runtime
