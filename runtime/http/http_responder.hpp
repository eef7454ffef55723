#pragma once
/// How an asynchronous route answers: an `http_responder` answers its request once, from any
/// thread and at any later time, with a whole response or a stream (chunked transfer encoding,
/// server-sent events), and tells whether the client has gone. The server's I/O thread is never
/// held while a route works.

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/http/http_message.hpp"

namespace milesrt::runtime {
namespace detail {
class http_exchange;
}

/// The open side of a streamed answer. Any thread may use it; what one thread sends goes out in
/// the order sent. When the last copy goes without close(), the stream is closed. A stream that
/// was refused (or default-made) counts as disconnected.
class http_stream {
 public:
  http_stream() = default;
  /// Queues `data` as one chunk; false (nothing sent) when the client has gone, the stream is
  /// closed, or it was never opened. Empty data is skipped (an empty chunk would end the answer).
  bool send(std::string data) const;
  /// Queues one server-sent event: `event: NAME` when `name` is not empty, a `data: LINE` for
  /// each line of `data`, and a blank line.
  bool event(std::string_view data, std::string_view name = {}) const;
  /// Ends the answer; the connection then serves the client's next request. Later sends fail.
  void close() const;
  /// True once the client has gone (closed its connection, or fell too far behind reading).
  bool disconnected() const;
  /// Calls `f` once, on the server's I/O thread, if the client goes before the answer ends (at
  /// once if it has gone already). `f` must not block.
  void on_disconnect(std::function<void()> f) const;

 private:
  friend class http_responder;
  explicit http_stream(std::shared_ptr<detail::http_exchange> x) : x_(std::move(x)) {}
  std::shared_ptr<detail::http_exchange> x_;
};

/// Answers one request, once. Copies share the answer; when the last copy goes without an
/// answer, the client gets a 500 saying so (never a hang).
class http_responder {
 public:
  explicit http_responder(std::shared_ptr<detail::http_exchange> x) : x_(std::move(x)) {}
  /// Sends `r`; false (nothing sent) when the request was answered already or the client has gone.
  bool respond(http_response r) const;
  /// Starts a streamed answer with `status`, `content_type` (`text/event-stream` for server-sent
  /// events) and any extra header fields; the stream refuses every send when the request was
  /// answered already or the client has gone (it then counts as disconnected).
  http_stream stream(unsigned status, std::string content_type,
                     std::vector<std::pair<std::string, std::string>> headers = {}) const;
  /// True once respond() or stream() was called.
  bool answered() const;
  bool disconnected() const;
  /// As http_stream::on_disconnect: `f` runs once, on the I/O thread, if the client goes before
  /// the answer ends.
  void on_disconnect(std::function<void()> f) const;

 private:
  std::shared_ptr<detail::http_exchange> x_;
};

}  // namespace milesrt::runtime
