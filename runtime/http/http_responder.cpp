// The responder's handles and the exchange behind them: every call takes the exchange's lock to
// move its phase on, then hands the bytes to the connection on the I/O thread.
#include "runtime/http/http_responder.hpp"

#include <boost/asio/post.hpp>

#include "runtime/http/http_connection.hpp"

namespace milesrt::runtime {

bool http_stream::send(std::string data) const { return x_ && x_->send(std::move(data)); }

bool http_stream::event(std::string_view data, std::string_view name) const {
  std::string text;
  if (!name.empty()) text.append("event: ").append(name).append("\n");
  size_t at = 0;
  while (true) {
    size_t end = data.find('\n', at);
    text.append("data: ").append(data.substr(at, end - at)).append("\n");
    if (end == std::string_view::npos) break;
    at = end + 1;
  }
  text.append("\n");
  return send(std::move(text));
}

void http_stream::close() const {
  if (x_) x_->close_stream();
}

bool http_stream::disconnected() const { return !x_ || x_->gone(); }

void http_stream::on_disconnect(std::function<void()> f) const {
  if (x_) return x_->on_gone(std::move(f));
  f();
}

bool http_responder::respond(http_response r) const { return x_->respond(std::move(r)); }

http_stream http_responder::stream(unsigned status, std::string content_type,
                                   std::vector<std::pair<std::string, std::string>> headers) const {
  if (!x_->open_stream(status, std::move(content_type), std::move(headers))) return http_stream();
  return http_stream(x_);
}

bool http_responder::answered() const { return x_->answered(); }
bool http_responder::disconnected() const { return x_->gone(); }
void http_responder::on_disconnect(std::function<void()> f) const { x_->on_gone(std::move(f)); }

namespace detail {

http_exchange::~http_exchange() {
  // The last handle went: a route that never answered gets a 500, an open stream is ended.
  if (phase_ == phase::waiting) {
    http_response r(500, "text/plain; charset=utf-8", "the route did not answer\n");
    post([r = std::move(r)](http_connection& c) mutable { c.write_response(std::move(r)); });
  } else if (phase_ == phase::streaming) {
    post([](http_connection& c) { c.end_stream(); });
  }
}

bool http_exchange::post(std::function<void(http_connection&)> f) {
  std::lock_guard<std::mutex> lock(life_->mutex);
  if (!life_->alive) return false;
  auto conn = conn_.lock();
  if (!conn) return false;
  boost::asio::post(life_->io, [conn = std::move(conn), f = std::move(f)] { f(*conn); });
  return true;
}

bool http_exchange::respond(http_response r) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (phase_ != phase::waiting) return false;
  phase_ = phase::responded;
  if (gone_) return false;
  return post([r = std::move(r)](http_connection& c) mutable { c.write_response(std::move(r)); });
}

bool http_exchange::open_stream(unsigned status, std::string content_type,
                                std::vector<std::pair<std::string, std::string>> headers) {
  // Posted under the lock, as every send is, so that the header goes before the first chunk.
  std::lock_guard<std::mutex> lock(mutex_);
  if (phase_ != phase::waiting) return false;
  phase_ = phase::streaming;
  if (gone_) return false;
  return post([status, content_type = std::move(content_type), headers = std::move(headers)](
                  http_connection& c) { c.open_stream(status, content_type, headers); });
}

bool http_exchange::send(std::string data) {
  if (data.empty()) return !gone_;
  std::lock_guard<std::mutex> lock(mutex_);
  // Under the lock, so that one stream's chunks are posted in the order their sends returned.
  if (phase_ != phase::streaming || gone_) return false;
  return post(
      [data = std::move(data)](http_connection& c) mutable { c.write_chunk(std::move(data)); });
}

void http_exchange::close_stream() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (phase_ != phase::streaming) return;
  phase_ = phase::closed;
  post([](http_connection& c) { c.end_stream(); });
}

bool http_exchange::answered() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return phase_ != phase::waiting;
}

void http_exchange::on_gone(std::function<void()> f) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!gone_) {
      on_gone_.push_back(std::move(f));
      return;
    }
  }
  f();
}

void http_exchange::mark_gone() {
  std::vector<std::function<void()>> calls;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (gone_.exchange(true)) return;
    calls.swap(on_gone_);
  }
  for (auto& f : calls) f();
}

}  // namespace detail
}  // namespace milesrt::runtime
