#pragma once
/// One HTTP/1.1 server (Boost.Beast) with its own I/O thread: the Prometheus endpoint, the live
/// page and the session API share it. Routes are a method and a path pattern with `{name}`
/// parameters (route_table.hpp). A route answers either at once (a function returning a
/// response, run on the server's handler thread) or later (a function given an http_responder,
/// http_responder.hpp), whole or as a stream; connections are served concurrently, so a slow
/// client or a slow route never holds the others up.
///
/// Refusals, in this order: a request whose Host header names neither the address the client
/// connected to (with the loopback names localhost, 127.0.0.1, [::1] when that is a loopback
/// address) nor an extra name from the options, with the server's port, is answered 421 (400
/// without one in HTTP/1.1): a page of another site whose name was rebound to the server's
/// address cannot read it. With a bearer secret, a request without `Authorization: Bearer
/// <secret>` is answered 401. A path no route has is 404, a method the path lacks 405 (with
/// `Allow`), a body past the limit 413, a header past 16 KiB 431, an unparsable request 400.
/// A failed accept (no file descriptor left) is retried after a pause that doubles up to 1 s.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/http/http_message.hpp"
#include "runtime/http/http_responder.hpp"

namespace milesrt::runtime {

/// Answers a GET of an exact path; `query` is what follows '?' ("" when none).
using http_handler = std::function<http_response(const std::string& query)>;
/// Answers a request at once. Runs on the server's one handler thread (routes of this kind run
/// one at a time, in arrival order), never on its I/O thread; it must guard what it shares with
/// other threads. An exception is answered 500 with its message.
using http_route = std::function<http_response(const http_request& request)>;
/// Takes a request and answers it later through the responder. Runs on the I/O thread, so it
/// must return at once, handing the work elsewhere (an actor, a queue). An exception thrown
/// before it answered is answered 500 with its message.
using http_async_route = std::function<void(http_request request, http_responder responder)>;

struct http_server_options {
  /// The address to listen on, an IP literal ("127.0.0.1", "0.0.0.0", "::1").
  std::string address = "127.0.0.1";
  /// 0: a free port.
  uint16_t port = 0;
  /// When not empty, every request must carry `Authorization: Bearer <bearer_secret>` (else
  /// 401). An address other than loopback is refused without one.
  std::string bearer_secret;
  /// Names besides the address that a request's Host header may carry ("gpu7.example"); the
  /// port is added.
  std::vector<std::string> host_names;
  /// The largest request body taken (413 past it).
  size_t body_limit = 1 << 20;
  /// How long a request's header and body may take to arrive, and a kept-alive connection may
  /// wait for its next request; the connection is closed past it.
  std::chrono::milliseconds read_timeout{30000};
  /// How long one write may wait for the client to read; the connection is closed past it.
  std::chrono::milliseconds write_timeout{30000};
  /// The bytes a stream may have queued for a client that reads slower than the route sends;
  /// past it the client counts as gone.
  size_t stream_queue_limit = 8 << 20;
  /// How the server's own refusals (404, 405, 413, ...) read; default: `message` as plain text.
  std::function<http_response(unsigned status, const std::string& message)> error_page;
};

class http_server {
 public:
  /// Binds 127.0.0.1:`port` (0: a free port) at once; throws as the constructor below.
  explicit http_server(uint16_t port);
  /// Binds `options.address`:`options.port` at once; throws std::runtime_error
  /// "cannot listen on ADDRESS:PORT: <reason>" when it cannot (a port in use, an address that is
  /// not an IP literal, an address other than loopback without a bearer secret).
  explicit http_server(http_server_options options);
  /// Stops serving: queued routes that have not started are dropped, a running one is waited
  /// for; responders kept elsewhere then answer nothing.
  ~http_server();
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  /// Adds a GET route of an exact path; only before start().
  void route(const std::string& path, http_handler handler);
  /// Adds a route answered at once; only before start(). Throws std::invalid_argument on a
  /// malformed or repeated pattern (route_table::add).
  void route(http_method method, const std::string& pattern, http_route handler);
  /// Adds a route answered later; only before start(). Throws as route().
  void route_async(http_method method, const std::string& pattern, http_async_route handler);
  /// Starts serving on the server's threads.
  void start();
  uint16_t port() const;
  /// The address listened on, as given.
  const std::string& address() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace milesrt::runtime
