// The responder's handles and the exchange behind them: every call takes the exchange's lock to
// move its phase on and queue its work, which runs on the I/O thread in the order queued.
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
  // The last handle went (a queued run holds one, so nothing is queued): a route that never
  // answered gets a 500, an open stream is ended.
  if (phase_ == phase::waiting) {
    http_response r(500, "text/plain; charset=utf-8", "the route did not answer\n");
    post_last([r = std::move(r)](http_connection& c) mutable { c.write_response(std::move(r)); });
  } else if (phase_ == phase::streaming) {
    post_last([](http_connection& c) { c.end_stream(); });
  }
}

bool http_exchange::queue(work f) {
  queued_.push_back(std::move(f));
  if (run_posted_) return true;
  std::lock_guard<std::mutex> lock(life_->mutex);
  auto conn = life_->alive ? conn_.lock() : nullptr;
  if (!conn) {
    queued_.clear();
    return false;
  }
  run_posted_ = true;
  boost::asio::post(
      life_->io, [self = shared_from_this(), conn = std::move(conn)] { self->run_queued(*conn); });
  return true;
}

void http_exchange::run_queued(http_connection& c) {
  std::deque<work> now;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    now.swap(queued_);
    run_posted_ = false;
  }
  for (auto& f : now) f(c);
}

void http_exchange::post_last(work f) {
  std::lock_guard<std::mutex> lock(life_->mutex);
  auto conn = life_->alive ? conn_.lock() : nullptr;
  if (!conn) return;
  boost::asio::post(life_->io, [conn = std::move(conn), f = std::move(f)] { f(*conn); });
}

bool http_exchange::respond(http_response r) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (phase_ != phase::waiting) return false;
  phase_ = phase::responded;
  if (gone_) return false;
  return queue([r = std::move(r)](http_connection& c) mutable { c.write_response(std::move(r)); });
}

bool http_exchange::open_stream(unsigned status, std::string content_type,
                                std::vector<std::pair<std::string, std::string>> headers) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (phase_ != phase::waiting) return false;
  phase_ = phase::streaming;
  if (gone_) return false;
  return queue([status, content_type = std::move(content_type), headers = std::move(headers)](
                   http_connection& c) { c.open_stream(status, content_type, headers); });
}

bool http_exchange::send(std::string data) {
  if (data.empty()) return !gone_;
  std::lock_guard<std::mutex> lock(mutex_);
  if (phase_ != phase::streaming || gone_) return false;
  return queue(
      [data = std::move(data)](http_connection& c) mutable { c.write_chunk(std::move(data)); });
}

void http_exchange::close_stream() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (phase_ != phase::streaming) return;
  phase_ = phase::closed;
  queue([](http_connection& c) { c.end_stream(); });
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
  for (auto& f : calls) {
    try {
      f();
    } catch (...) {  // on the I/O thread: a callback that throws must not end the server
    }
  }
}

}  // namespace detail
}  // namespace milesrt::runtime
