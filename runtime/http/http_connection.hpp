#pragma once
/// The inside of http_server (not for its users): what its connections share, one connection,
/// and the exchange between a connection and the responder of its current request.

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/http/http_server.hpp"
#include "runtime/http/route_table.hpp"

namespace milesrt::runtime::detail {

class http_connection;

/// Whether the server still runs; responders post to its I/O thread only under `mutex` while
/// `alive`, so that none posts to an io_context being destroyed.
struct http_life {
  explicit http_life(boost::asio::io_context& c) : io(c) {}
  std::mutex mutex;
  bool alive = true;
  boost::asio::io_context& io;
};

/// What every connection of one server reads; touched only on the I/O thread once started,
/// except `handlers` (a thread of its own) and `life`.
struct http_core {
  http_server_options options;
  uint16_t port = 0;
  route_table routes;
  /// Per route index: one of the two is set.
  std::vector<http_route> sync_routes;
  std::vector<http_async_route> async_routes;
  std::shared_ptr<http_life> life;
  boost::asio::thread_pool* handlers = nullptr;
  /// The open connections, so that they end with the server.
  std::set<std::shared_ptr<http_connection>> connections;

  http_response error(unsigned status, const std::string& message) const;
};

/// The current request's answer, shared by its responder's copies; the connection keeps only a
/// weak reference. Any thread calls it; it hands the work to the I/O thread in the order called:
/// Asio's own queue does not keep the order of posts from the I/O thread and from others.
class http_exchange : public std::enable_shared_from_this<http_exchange> {
 public:
  http_exchange(std::shared_ptr<http_life> life, std::weak_ptr<http_connection> conn)
      : life_(std::move(life)), conn_(std::move(conn)) {}
  ~http_exchange();

  bool respond(http_response r);
  bool open_stream(unsigned status, std::string content_type,
                   std::vector<std::pair<std::string, std::string>> headers);
  bool send(std::string data);
  void close_stream();
  bool answered() const;
  bool gone() const { return gone_.load(); }
  void on_gone(std::function<void()> f);
  /// The client has gone (I/O thread): run the callbacks, once.
  void mark_gone();

 private:
  enum class phase { waiting, responded, streaming, closed };
  using work = std::function<void(http_connection&)>;
  /// Queues `f` for the I/O thread, behind what was queued before (`mutex_` held); false when
  /// the server or the connection has gone.
  bool queue(work f);
  /// Runs what was queued, in order (I/O thread).
  void run_queued(http_connection& c);
  /// Posts `f` alone (from the destructor, when nothing else can be queued).
  void post_last(work f);

  std::shared_ptr<http_life> life_;
  std::weak_ptr<http_connection> conn_;
  mutable std::mutex mutex_;
  phase phase_ = phase::waiting;
  std::deque<work> queued_;
  bool run_posted_ = false;
  std::atomic<bool> gone_{false};
  std::vector<std::function<void()>> on_gone_;
};

/// One client connection: reads a request, hands it to its route, writes the answer (whole or
/// streamed) and then reads the next. While a route works, a read stays open to learn whether
/// the client goes. Lives on the I/O thread; owned by http_core::connections.
class http_connection : public std::enable_shared_from_this<http_connection> {
 public:
  http_connection(boost::asio::ip::tcp::socket socket, http_core& core);
  void start() { read_request(); }
  /// Ends the connection now (no answer); a pending answer's client counts as gone.
  void close();

  // Called by the exchange, on the I/O thread.
  void write_response(http_response r);
  void open_stream(unsigned status, const std::string& content_type,
                   const std::vector<std::pair<std::string, std::string>>& headers);
  void write_chunk(std::string data);
  void end_stream();

 private:
  void read_request();
  void on_header(boost::beast::error_code ec);
  void on_request(boost::beast::error_code ec);
  void refuse_read(boost::beast::error_code ec);
  /// Why the request is refused before its body is read; status 0 when it is not.
  http_response screen(const boost::beast::http::request<boost::beast::http::string_body>& req);
  void dispatch();
  void watch();
  void on_watch(boost::beast::error_code ec, size_t n);
  void answer_done(bool keep_alive);
  /// Ends the connection after its last answer: no more sending, the client's unread bytes read
  /// and dropped (up to a limit and a time) so that the answer is not lost to a reset, then close.
  void linger();
  void drain();
  void queue_raw(std::string bytes);
  void pump();
  void arm(std::chrono::milliseconds after);
  void disarm();

  boost::asio::ip::tcp::socket socket_;
  http_core& core_;
  boost::asio::steady_timer timer_;
  uint64_t timer_generation_ = 0;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  route_match match_;
  std::weak_ptr<http_exchange> exchange_;
  unsigned version_ = 11;  ///< the current request's HTTP version (11: 1.1)
  size_t drained_ = 0;
  bool closed_ = false;
  bool head_ = false;        ///< the current request is a HEAD
  bool keep_alive_ = false;  ///< the current request allows the next
  bool answering_ = false;   ///< a route has the current request
  bool watching_ = false;    ///< the read that notices a client going is open
  bool resume_ = false;      ///< read the next request once that read ends
  bool chunked_ = false;     ///< the stream uses chunked encoding (HTTP/1.1)
  bool writing_ = false;
  bool end_after_writes_ = false;
  std::deque<std::string> out_;
  size_t queued_ = 0;
  std::string remote_;
  std::set<std::string> hosts_;
};

}  // namespace milesrt::runtime::detail
