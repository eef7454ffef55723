// The server: binds at once, accepts on its I/O thread (backing off when accept fails), runs the
// routes answered at once on a handler thread of their own, and ends both threads and every
// connection when it goes.
#include "runtime/http/http_server.hpp"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <stdexcept>
#include <thread>

#include "runtime/http/http_connection.hpp"

namespace milesrt::runtime {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

bool loopback(const asio::ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped())
    return asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6()).is_loopback();
  return a.is_loopback();
}

}  // namespace

struct http_server::impl {
  asio::io_context io{1};  // first: destroyed last, after everything that uses it
  asio::thread_pool handlers{1};
  detail::http_core core;
  tcp::acceptor acceptor{io};
  std::thread thread;
  bool started = false;
  /// After a failed accept (no file descriptor left, say) the next waits, doubling up to 1 s, so
  /// that a pending connection the server cannot take does not spin the thread.
  asio::steady_timer retry{io};
  std::chrono::milliseconds backoff{0};

  void accept() {
    acceptor.async_accept(io, [this](boost::system::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (ec) return accept_later();
      backoff = std::chrono::milliseconds(0);
      auto c = std::make_shared<detail::http_connection>(std::move(socket), core);
      core.connections.insert(c);
      c->start();
      accept();
    });
  }

  void accept_later() {
    backoff = std::min(std::chrono::milliseconds(1000),
                       std::max(std::chrono::milliseconds(10), backoff * 2));
    retry.expires_after(backoff);
    retry.async_wait([this](boost::system::error_code ec) {
      if (ec != asio::error::operation_aborted) accept();
    });
  }

  void add(http_method method, const std::string& pattern, http_route sync,
           http_async_route async) {
    if (started)
      throw std::logic_error("http_server: route " + std::string(to_string(method)) + " " +
                             pattern + " added after start");
    core.routes.add(method, pattern);
    core.sync_routes.push_back(std::move(sync));
    core.async_routes.push_back(std::move(async));
  }
};

http_server::http_server(uint16_t port)
    : http_server([port] {
        http_server_options o;
        o.port = port;
        return o;
      }()) {}

http_server::http_server(http_server_options options) : impl_(std::make_unique<impl>()) {
  auto& core = impl_->core;
  core.options = std::move(options);
  core.life = std::make_shared<detail::http_life>(impl_->io);
  core.handlers = &impl_->handlers;
  const auto& o = core.options;
  boost::system::error_code ec;
  auto fail = [&](const std::string& what) {
    throw std::runtime_error("cannot listen on " + o.address + ":" + std::to_string(o.port) + ": " +
                             what);
  };
  auto address = asio::ip::make_address(o.address, ec);
  if (ec) fail("not an IP address (" + ec.message() + ")");
  if (!loopback(address) && o.bearer_secret.empty())
    fail("an address other than loopback needs a bearer secret (every request must then carry it)");
  tcp::endpoint at{address, o.port};
  auto& acceptor = impl_->acceptor;
  acceptor.open(at.protocol(), ec);
  if (ec) fail("open: " + ec.message());
  acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  acceptor.bind(at, ec);
  if (ec) fail("bind: " + ec.message());
  acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) fail("listen: " + ec.message());
  core.port = acceptor.local_endpoint().port();
}

http_server::~http_server() {
  {
    // From here no responder posts to the I/O thread.
    std::lock_guard<std::mutex> lock(impl_->core.life->mutex);
    impl_->core.life->alive = false;
  }
  impl_->handlers.stop();
  impl_->handlers.join();
  if (!impl_->started) return;
  asio::post(impl_->io, [this] {
    boost::system::error_code ec;
    impl_->acceptor.close(ec);
    impl_->retry.cancel();
    auto open = impl_->core.connections;  // each close() leaves the set
    for (const auto& c : open) c->close();
    impl_->io.stop();
  });
  impl_->thread.join();
}

void http_server::route(const std::string& path, http_handler handler) {
  impl_->add(
      http_method::get, path,
      [handler = std::move(handler)](const http_request& r) { return handler(r.query); }, nullptr);
}

void http_server::route(http_method method, const std::string& pattern, http_route handler) {
  impl_->add(method, pattern, std::move(handler), nullptr);
}

void http_server::route_async(http_method method, const std::string& pattern,
                              http_async_route handler) {
  impl_->add(method, pattern, nullptr, std::move(handler));
}

void http_server::start() {
  if (impl_->started) return;
  impl_->started = true;
  impl_->accept();
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

uint16_t http_server::port() const { return impl_->core.port; }

const std::string& http_server::address() const { return impl_->core.options.address; }

}  // namespace milesrt::runtime
