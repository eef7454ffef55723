#include "runtime/http/http_server.hpp"

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <set>
#include <stdexcept>
#include <thread>

namespace milesrt::runtime {
namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

using routes = std::map<std::string, http_handler>;

/// The Host values a request may carry: the loopback names with the bound port (without it too
/// when the port is 80, as browsers leave the default port out). Another name means a page of
/// another site whose name was pointed at 127.0.0.1 (DNS rebinding): it is refused.
std::set<std::string> allowed_hosts(uint16_t port) {
  std::set<std::string> out;
  for (const char* name : {"localhost", "127.0.0.1", "[::1]"}) {
    out.insert(std::string(name) + ":" + std::to_string(port));
    if (port == 80) out.insert(name);
  }
  return out;
}

/// Why a request's Host header is refused; "" when it names this server. HTTP/1.0 requests may
/// leave it out (no browser does).
std::string host_problem(const http::request<http::string_body>& req,
                         const std::set<std::string>& allowed) {
  auto it = req.find(http::field::host);
  if (it == req.end()) return req.version() >= 11 ? "no Host header" : "";
  std::string host(it->value());
  std::transform(host.begin(), host.end(), host.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (allowed.count(host)) return "";
  std::string shown = host.substr(0, 100);
  for (char& c : shown)
    if (!std::isprint(static_cast<unsigned char>(c))) c = '?';
  return "Host '" + shown + "' is not this server (expected " + *allowed.rbegin() + " or " +
         *allowed.begin() + ")";
}

/// One connection: read a request, answer it, keep the connection open while the client asks.
class session : public std::enable_shared_from_this<session> {
 public:
  session(tcp::socket socket, const routes& r, const std::set<std::string>& hosts)
      : stream_(std::move(socket)), routes_(r), hosts_(hosts) {}
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
    if (auto problem = host_problem(request_, hosts_); !problem.empty()) {
      r = {problem.rfind("no ", 0) == 0 ? 400u : 421u, "text/plain; charset=utf-8",
           "refused: " + problem + "\n"};
    } else if (request_.method() != http::verb::get && request_.method() != http::verb::head) {
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
  const std::set<std::string>& hosts_;
};

}  // namespace

struct http_server::impl {
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  routes table;
  std::set<std::string> hosts;
  std::thread thread;
  bool started = false;
  uint16_t port = 0;
  /// After a failed accept (no file descriptor left, say) the next waits, doubling up to 1 s, so
  /// that a pending connection the server cannot take does not spin the thread.
  asio::steady_timer retry{io};
  std::chrono::milliseconds backoff{0};

  void accept() {
    acceptor.async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (ec) return accept_later();
      backoff = std::chrono::milliseconds(0);
      std::make_shared<session>(std::move(socket), table, hosts)->run();
      accept();
    });
  }

  void accept_later() {
    backoff = std::min(std::chrono::milliseconds(1000),
                       std::max(std::chrono::milliseconds(10), backoff * 2));
    retry.expires_after(backoff);
    retry.async_wait([this](beast::error_code ec) {
      if (ec != asio::error::operation_aborted) accept();
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
  impl_->hosts = allowed_hosts(impl_->port);
}

http_server::~http_server() {
  if (!impl_->started) return;
  asio::post(impl_->io, [this] {
    beast::error_code ec;
    impl_->acceptor.close(ec);
    impl_->retry.cancel();
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
