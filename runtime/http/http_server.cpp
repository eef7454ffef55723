#include "runtime/http/http_server.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <stdexcept>
#include <thread>

namespace milesrt::runtime {
namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

using routes = std::map<std::string, http_handler>;

/// One connection: read a request, answer it, keep the connection open while the client asks.
class session : public std::enable_shared_from_this<session> {
 public:
  session(tcp::socket socket, const routes& r) : stream_(std::move(socket)), routes_(r) {}
  void run() { read(); }

 private:
  void read() {
    request_ = {};
    stream_.expires_after(std::chrono::seconds(30));
    http::async_read(stream_, buffer_, request_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->close();
                       self->answer();
                     });
  }

  void answer() {
    http_response r;
    std::string target(request_.target());
    auto q = target.find('?');
    std::string path = target.substr(0, q);
    std::string query = q == std::string::npos ? "" : target.substr(q + 1);
    if (request_.method() != http::verb::get && request_.method() != http::verb::head) {
      r = {405, "text/plain; charset=utf-8", "only GET\n"};
    } else if (auto it = routes_.find(path); it != routes_.end()) {
      try {
        r = it->second(query);
      } catch (const std::exception& e) {
        r = {500, "text/plain; charset=utf-8", std::string(e.what()) + "\n"};
      }
    } else {
      r = {404, "text/plain; charset=utf-8", "no such page: " + path + "\n"};
    }
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(r.status), request_.version());
    res->set(http::field::server, "milesrt");
    res->set(http::field::content_type, r.content_type);
    res->set(http::field::cache_control, "no-store");
    res->keep_alive(request_.keep_alive());
    res->body() = request_.method() == http::verb::head ? "" : std::move(r.body);
    res->prepare_payload();
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res](beast::error_code ec, size_t) {
                        if (ec || !res->keep_alive()) return self->close();
                        self->read();
                      });
  }

  void close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> request_;
  const routes& routes_;
};

}  // namespace

struct http_server::impl {
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  routes table;
  std::thread thread;
  bool started = false;
  uint16_t port = 0;

  void accept() {
    acceptor.async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (!ec) std::make_shared<session>(std::move(socket), table)->run();
      accept();
    });
  }
};

http_server::http_server(uint16_t port) : impl_(std::make_unique<impl>()) {
  beast::error_code ec;
  tcp::endpoint at{asio::ip::make_address("127.0.0.1"), port};
  auto fail = [&](const char* what) {
    throw std::runtime_error("cannot listen on 127.0.0.1:" + std::to_string(port) + ": " + what +
                             ": " + ec.message());
  };
  impl_->acceptor.open(at.protocol(), ec);
  if (ec) fail("open");
  impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  impl_->acceptor.bind(at, ec);
  if (ec) fail("bind");
  impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) fail("listen");
  impl_->port = impl_->acceptor.local_endpoint().port();
}

http_server::~http_server() {
  if (!impl_->started) return;
  asio::post(impl_->io, [this] {
    beast::error_code ec;
    impl_->acceptor.close(ec);
    impl_->io.stop();
  });
  impl_->thread.join();
}

void http_server::route(const std::string& path, http_handler handler) {
  if (impl_->started) throw std::logic_error("http_server: route " + path + " added after start");
  impl_->table[path] = std::move(handler);
}

void http_server::start() {
  if (impl_->started) return;
  impl_->started = true;
  impl_->accept();
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

uint16_t http_server::port() const { return impl_->port; }

}  // namespace milesrt::runtime
