// One connection of the HTTP server: the request's header is read and screened (Host, bearer
// secret, route), then its body; the route gets it; the answer is written whole or as a stream;
// then the next request. While a route works, a read stays open: it notices the client going.
#include "runtime/http/http_connection.hpp"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <cctype>
#include <sstream>

namespace milesrt::runtime::detail {
namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

constexpr size_t kHeaderLimit = 16 * 1024;
/// Bytes of the client's next request read ahead while its answer is pending; past them the
/// server stops noticing a client going until the answer ends.
constexpr size_t kReadAheadLimit = 64 * 1024;
/// After a refusal or a last answer: how long and how much of the client's unread bytes are
/// read and dropped before the socket closes, so that the answer is not lost to a reset.
constexpr std::chrono::milliseconds kLingerTime{2000};
constexpr size_t kLingerBytes = 4 << 20;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

/// `text` cut to `n` bytes, with anything unprintable as '?': safe to show in an answer.
std::string shown(std::string_view text, size_t n = 200) {
  std::string out(text.substr(0, n));
  for (char& c : out)
    if (!std::isprint(static_cast<unsigned char>(c))) c = '?';
  return out;
}

/// The Host values a request may carry on a connection to `local`: that address (and the
/// loopback names when it is a loopback address) and the extra names, each with the port (and
/// without it too when the port is 80, as browsers leave the default port out). Another name
/// means a page of another site whose name was pointed at this address (DNS rebinding).
std::set<std::string> allowed_hosts(asio::ip::address local, uint16_t port,
                                    const std::vector<std::string>& names) {
  if (local.is_v6() && local.to_v6().is_v4_mapped())
    local = asio::ip::make_address_v4(asio::ip::v4_mapped, local.to_v6());
  std::vector<std::string> bare;
  if (local.is_loopback()) bare = {"localhost", "127.0.0.1", "[::1]"};
  bare.push_back(local.is_v6() ? "[" + local.to_string() + "]" : local.to_string());
  for (const auto& n : names) bare.push_back(lower(n));
  std::set<std::string> out;
  for (const auto& n : bare) {
    out.insert(n + ":" + std::to_string(port));
    if (port == 80) out.insert(n);
  }
  return out;
}

/// Why a request's Host header is refused; "" when it names this server. HTTP/1.0 requests may
/// leave it out (no browser does).
std::string host_problem(const http::request<http::string_body>& req,
                         const std::set<std::string>& allowed, uint16_t port) {
  auto it = req.find(http::field::host);
  if (it == req.end()) return req.version() >= 11 ? "no Host header" : "";
  std::string host = lower(std::string(it->value()));
  if (allowed.count(host)) return "";
  const std::string p = ":" + std::to_string(port);
  std::string expected =
      allowed.count("localhost" + p) ? "localhost" + p + " or 127.0.0.1" + p : *allowed.begin();
  return "Host '" + shown(host, 100) + "' is not this server (expected " + expected + ")";
}

/// Whether `req` carries `Authorization: Bearer <secret>`, compared in constant time.
bool bearer_ok(const http::request<http::string_body>& req, const std::string& secret) {
  auto it = req.find(http::field::authorization);
  if (it == req.end()) return false;
  std::string_view v(it->value().data(), it->value().size());
  if (v.size() < 7 || lower(std::string(v.substr(0, 7))) != "bearer ") return false;
  v.remove_prefix(7);
  while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
  while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
  if (v.size() != secret.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < v.size(); ++i) diff |= static_cast<unsigned char>(v[i] ^ secret[i]);
  return diff == 0;
}

std::string allow_list(const std::vector<http_method>& methods) {
  std::string out;
  for (auto m : methods) {
    if (!out.empty()) out += ", ";
    out += to_string(m);
    if (m == http_method::get) out += ", HEAD";
  }
  return out;
}

template <class Message>
void set_fields(Message& m, const std::string& content_type,
                const std::vector<std::pair<std::string, std::string>>& headers) {
  m.set(http::field::server, "milesrt");
  m.set(http::field::content_type, content_type);
  m.set(http::field::cache_control, "no-store");
  for (const auto& [name, value] : headers) m.insert(name, value);
}

}  // namespace

http_response http_core::error(unsigned status, const std::string& message) const {
  if (options.error_page) return options.error_page(status, message);
  return http_response(status, "text/plain; charset=utf-8", message + "\n");
}

http_connection::http_connection(tcp::socket socket, http_core& core)
    : socket_(std::move(socket)), core_(core), timer_(socket_.get_executor()) {
  beast::error_code ec;
  auto local = socket_.local_endpoint(ec);
  auto remote = socket_.remote_endpoint(ec);
  if (!ec) remote_ = remote.address().to_string() + ":" + std::to_string(remote.port());
  hosts_ = allowed_hosts(local.address(), core.port, core.options.host_names);
}

void http_connection::read_request() {
  if (closed_) return;
  parser_.emplace();
  parser_->header_limit(kHeaderLimit);
  parser_->body_limit(core_.options.body_limit);
  arm(core_.options.read_timeout);
  http::async_read_header(
      socket_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
}

void http_connection::on_header(beast::error_code ec) {
  if (closed_) return;
  if (ec) return refuse_read(ec);
  const auto& req = parser_->get();
  version_ = req.version();
  head_ = req.method() == http::verb::head;
  keep_alive_ = req.keep_alive();
  http_response refusal = screen(req);
  if (refusal.status != 0) {
    keep_alive_ = false;  // the body, if any, stays unread
    return write_response(std::move(refusal));
  }
  if (parser_->is_done()) return on_request({});
  auto read_body = [self = shared_from_this()] {
    http::async_read(self->socket_, self->buffer_, *self->parser_,
                     [self](beast::error_code ec, size_t) { self->on_request(ec); });
  };
  if (lower(std::string(req[http::field::expect])) != "100-continue") return read_body();
  static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
  asio::async_write(socket_, asio::buffer(kContinue),
                    [self = shared_from_this(), read_body](beast::error_code ec, size_t) {
                      if (ec) return self->close();
                      read_body();
                    });
}

http_response http_connection::screen(const http::request<http::string_body>& req) {
  if (auto problem = host_problem(req, hosts_, core_.port); !problem.empty())
    return core_.error(problem.rfind("no ", 0) == 0 ? 400 : 421, "refused: " + problem);
  if (!core_.options.bearer_secret.empty() && !bearer_ok(req, core_.options.bearer_secret)) {
    auto r =
        core_.error(401, "refused: this server needs the header Authorization: Bearer <secret>");
    r.headers.emplace_back("WWW-Authenticate", "Bearer");
    return r;
  }
  std::string_view target(req.target().data(), req.target().size());
  const std::string path(target.substr(0, target.find('?')));
  std::optional<http_method> method;
  switch (req.method()) {
    case http::verb::get:
    case http::verb::head:
      method = http_method::get;
      break;
    case http::verb::post:
      method = http_method::post;
      break;
    case http::verb::delete_:
      method = http_method::del;
      break;
    default:
      break;
  }
  match_ = method ? core_.routes.match(*method, path) : route_match{};
  if (!method) match_.allowed = core_.routes.methods(path);
  if (!method && !match_.allowed.empty()) match_.what = route_match::outcome::wrong_method;
  switch (match_.what) {
    case route_match::outcome::found:
      return http_response(0, "", "");
    case route_match::outcome::no_path:
      return core_.error(404, "no such page: " + shown(path));
    case route_match::outcome::wrong_method: {
      auto r = core_.error(405, "method " + shown(std::string(req.method_string()), 20) +
                                    " is not served at " + shown(path) +
                                    " (allowed: " + allow_list(match_.allowed) + ")");
      r.headers.emplace_back("Allow", allow_list(match_.allowed));
      return r;
    }
    case route_match::outcome::bad_path:
      return core_.error(400, match_.problem);
  }
  return core_.error(500, "unreachable");
}

void http_connection::on_request(beast::error_code ec) {
  if (closed_) return;
  if (ec) return refuse_read(ec);
  disarm();
  dispatch();
}

void http_connection::refuse_read(beast::error_code ec) {
  keep_alive_ = false;
  if (ec == http::error::body_limit) {
    return write_response(core_.error(
        413,
        "request body over the limit of " + std::to_string(core_.options.body_limit) + " bytes"));
  }
  if (ec == http::error::header_limit)
    return write_response(core_.error(431, "request header over 16 KiB"));
  if (ec.category() == http::make_error_code(http::error::bad_target).category() &&
      ec != http::error::end_of_stream && ec != http::error::partial_message) {
    return write_response(core_.error(400, "bad request: " + ec.message()));
  }
  close();  // the client went, or the read timed out
}

void http_connection::dispatch() {
  auto raw = parser_->release();
  parser_.reset();
  http_request req;
  req.method = raw.method() == http::verb::post      ? http_method::post
               : raw.method() == http::verb::delete_ ? http_method::del
                                                     : http_method::get;
  std::string target(raw.target());
  auto q = target.find('?');
  req.path = target.substr(0, q);
  req.query = q == std::string::npos ? "" : target.substr(q + 1);
  for (const auto& f : raw)
    req.headers.emplace_back(lower(std::string(f.name_string())), std::string(f.value()));
  req.body = std::move(raw.body());
  req.params = std::move(match_.params);
  req.remote = remote_;
  auto x = std::make_shared<http_exchange>(core_.life, weak_from_this());
  exchange_ = x;
  answering_ = true;
  http_responder responder(std::move(x));
  watch();
  const size_t i = match_.index;
  if (core_.async_routes[i]) {
    try {
      core_.async_routes[i](std::move(req), responder);
    } catch (const std::exception& e) {
      responder.respond(core_.error(500, e.what()));
    }
    return;
  }
  asio::post(*core_.handlers, [route = &core_.sync_routes[i], core = &core_, req = std::move(req),
                               responder = std::move(responder)] {
    http_response r;
    try {
      r = (*route)(req);
    } catch (const std::exception& e) {
      r = core->error(500, e.what());
    }
    responder.respond(std::move(r));
  });
}

void http_connection::watch() {
  if (closed_ || watching_ || buffer_.size() >= kReadAheadLimit) return;
  watching_ = true;
  socket_.async_read_some(
      buffer_.prepare(4096),
      [self = shared_from_this()](beast::error_code ec, size_t n) { self->on_watch(ec, n); });
}

void http_connection::on_watch(beast::error_code ec, size_t n) {
  watching_ = false;
  buffer_.commit(n);
  if (closed_) return;
  if (resume_) {
    resume_ = false;
    return keep_alive_ ? read_request() : linger();
  }
  if (ec) return close();  // the client went while its answer was pending
  watch();
}

void http_connection::write_response(http_response r) {
  if (closed_) return;
  if (r.status < 100 || r.status > 599)
    r = core_.error(500, "the route answered status " + std::to_string(r.status));
  auto res = std::make_shared<http::response<http::string_body>>();
  res->version(version_);
  res->result(r.status);
  set_fields(*res, r.content_type, r.headers);
  res->keep_alive(keep_alive_);
  if (head_) {
    res->content_length(r.body.size());
  } else {
    res->body() = std::move(r.body);
    res->prepare_payload();
  }
  writing_ = true;
  arm(core_.options.write_timeout);
  http::async_write(socket_, *res, [self = shared_from_this(), res](beast::error_code ec, size_t) {
    self->writing_ = false;
    self->disarm();
    if (ec) return self->close();
    self->answer_done(res->keep_alive());
  });
}

void http_connection::open_stream(unsigned status, const std::string& content_type,
                                  const std::vector<std::pair<std::string, std::string>>& headers) {
  if (closed_) return;
  chunked_ = version_ >= 11;
  if (!chunked_) keep_alive_ = false;  // HTTP/1.0: the end of the stream is the connection's
  http::response<http::empty_body> res;
  res.version(version_);
  res.result(status);
  set_fields(res, content_type, headers);
  res.keep_alive(keep_alive_);
  if (chunked_) res.chunked(true);
  std::ostringstream os;
  os << res.base();
  queue_raw(os.str());
}

void http_connection::write_chunk(std::string data) {
  if (closed_ || head_ || data.empty()) return;
  if (!chunked_) return queue_raw(std::move(data));
  std::ostringstream size;
  size << std::hex << data.size() << "\r\n";
  queue_raw(size.str() + data + "\r\n");
}

void http_connection::end_stream() {
  if (closed_) return;
  if (chunked_ && !head_) queue_raw("0\r\n\r\n");
  end_after_writes_ = true;
  pump();
}

void http_connection::queue_raw(std::string bytes) {
  if (closed_) return;
  queued_ += bytes.size();
  if (queued_ > core_.options.stream_queue_limit) return close();  // a client far behind
  out_.push_back(std::move(bytes));
  pump();
}

void http_connection::pump() {
  if (writing_ || closed_) return;
  if (out_.empty()) {
    if (!end_after_writes_) return;
    end_after_writes_ = false;
    return answer_done(keep_alive_);
  }
  // Whatever has queued up goes out as one write.
  while (out_.size() > 1) {
    out_[0] += out_[1];
    out_.erase(out_.begin() + 1);
  }
  writing_ = true;
  arm(core_.options.write_timeout);
  asio::async_write(socket_, asio::buffer(out_.front()),
                    [self = shared_from_this()](beast::error_code ec, size_t) {
                      self->writing_ = false;
                      self->disarm();
                      if (ec) return self->close();
                      self->queued_ -= self->out_.front().size();
                      self->out_.pop_front();
                      self->pump();
                    });
}

void http_connection::answer_done(bool keep_alive) {
  answering_ = false;
  exchange_.reset();
  keep_alive_ = keep_alive;
  if (watching_) {  // the read that watched the client ends first, then the next step
    resume_ = true;
    beast::error_code ec;
    socket_.cancel(ec);
    return;
  }
  keep_alive_ ? read_request() : linger();
}

void http_connection::linger() {
  if (closed_) return;
  beast::error_code ec;
  socket_.shutdown(tcp::socket::shutdown_send, ec);
  arm(kLingerTime);
  drain();
}

void http_connection::drain() {
  buffer_.clear();
  socket_.async_read_some(buffer_.prepare(16384),
                          [self = shared_from_this()](beast::error_code ec, size_t n) {
                            self->drained_ += n;
                            if (ec || self->drained_ > kLingerBytes) return self->close();
                            self->drain();
                          });
}

void http_connection::close() {
  if (closed_) return;
  closed_ = true;
  beast::error_code ec;
  timer_.cancel();
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  if (answering_)
    if (auto x = exchange_.lock()) x->mark_gone();
  core_.connections.erase(shared_from_this());  // last: it may end this object
}

void http_connection::arm(std::chrono::milliseconds after) {
  const uint64_t generation = ++timer_generation_;
  timer_.expires_after(after);
  timer_.async_wait([self = shared_from_this(), generation](beast::error_code ec) {
    if (ec || generation != self->timer_generation_) return;
    self->close();
  });
}

void http_connection::disarm() {
  ++timer_generation_;
  timer_.cancel();
}

}  // namespace milesrt::runtime::detail
