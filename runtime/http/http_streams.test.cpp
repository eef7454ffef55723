// Routes that answer later: from other threads, concurrently, as streams of server-sent events;
// clients that go before or during their answer; a client too slow to read; responders that are
// dropped or outlive the server. Real sockets and Beast's client on loopback.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "runtime/http/http_server.hpp"
#include "runtime/http/http_test_client.hpp"

namespace milesrt::runtime {
namespace {

namespace http = boost::beast::http;
using testing::http_call;
using verb = http::verb;
using namespace std::chrono_literals;

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string get_line(uint16_t port, const std::string& target, const std::string& version = "1.1") {
  return "GET " + target + " HTTP/" + version + "\r\nHost: 127.0.0.1:" + std::to_string(port) +
         "\r\n\r\n";
}

/// Work handed from the I/O thread to a thread of the test, as an actor would take it.
class work_queue {
 public:
  void push(std::function<void()> f) {
    std::lock_guard<std::mutex> lock(mutex_);
    items_.push_back(std::move(f));
    ready_.notify_one();
  }
  /// Runs items on `threads` threads until stopped.
  void run(int threads) {
    for (int i = 0; i < threads; ++i)
      workers_.emplace_back([this] {
        while (true) {
          std::function<void()> f;
          {
            std::unique_lock<std::mutex> lock(mutex_);
            ready_.wait(lock, [&] { return stop_ || !items_.empty(); });
            if (items_.empty()) return;
            f = std::move(items_.front());
            items_.pop_front();
          }
          f();
        }
      });
  }
  ~work_queue() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      ready_.notify_all();
    }
    for (auto& t : workers_) t.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> items_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

TEST(HttpStreams, AsyncRoutesAnswerLaterFromOtherThreadsConcurrently) {
  http_server server(0);
  work_queue work;
  server.route_async(http_method::post, "/slow/{n}", [&work](http_request req, http_responder r) {
    work.push([req = std::move(req), r] {
      std::this_thread::sleep_for(400ms);
      EXPECT_TRUE(r.respond(http_response(200, "text/plain", req.param("n") + ":" + req.body)));
      EXPECT_FALSE(r.respond(http_response(200, "text/plain", "twice")));  // once only
      EXPECT_TRUE(r.answered());
    });
  });
  server.start();
  work.run(8);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::future<std::string>> clients;
  for (int c = 0; c < 8; ++c)
    clients.push_back(std::async(std::launch::async, [&server, c] {
      return http_call(server.port(), verb::post, "/slow/" + std::to_string(c), "b").body;
    }));
  for (int c = 0; c < 8; ++c) EXPECT_EQ(clients[c].get(), std::to_string(c) + ":b");
  EXPECT_LT(seconds_since(start), 2.0) << "8 answers of 0.4 s each were not served side by side";
}

TEST(HttpStreams, ASlowRouteHoldsUpNoOtherClient) {
  http_server server(0);
  server.route(http_method::get, "/slow", [](const http_request&) {
    std::this_thread::sleep_for(2s);  // on the handler thread, never the I/O thread
    return http_response(200, "text/plain", "slow");
  });
  server.route_async(http_method::get, "/fast", [](http_request, http_responder r) {
    r.respond(http_response(200, "text/plain", "fast"));
  });
  server.route_async(http_method::get, "/events", [](http_request, http_responder r) {
    auto s = r.stream(200, "text/event-stream");
    s.event("one");
    s.close();
  });
  server.start();
  auto slow = std::async(std::launch::async,
                         [&] { return http_call(server.port(), verb::get, "/slow").body; });
  std::this_thread::sleep_for(200ms);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(http_call(server.port(), verb::get, "/fast").body, "fast");
  EXPECT_EQ(http_call(server.port(), verb::get, "/events").body, "data: one\n\n");
  EXPECT_LT(seconds_since(start), 0.5);
  EXPECT_EQ(slow.get(), "slow");
}

TEST(HttpStreams, StreamsServerSentEventsInOrder) {
  http_server server(0);
  work_queue work;
  server.route_async(http_method::get, "/events", [&work](http_request, http_responder r) {
    work.push([r] {
      auto s = r.stream(200, "text/event-stream", {{"X-Session", "7"}});
      for (int i = 0; i < 20; ++i) EXPECT_TRUE(s.event("n=" + std::to_string(i), "tick"));
      EXPECT_TRUE(s.event("two\nlines"));
      EXPECT_TRUE(s.send("raw bytes\n"));
      s.close();
      EXPECT_FALSE(s.send("after close"));
      EXPECT_FALSE(r.respond(http_response(200, "text/plain", "too late")));
    });
  });
  server.route("/", [](const std::string&) { return http_response(200, "text/plain", "next"); });
  server.start();
  work.run(1);
  std::string expected;
  for (int i = 0; i < 20; ++i) expected += "event: tick\ndata: n=" + std::to_string(i) + "\n\n";
  expected += "data: two\ndata: lines\n\nraw bytes\n";
  testing::http_client client(server.port());
  auto r = client.call(verb::get, "/events");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"], "text/event-stream");
  EXPECT_EQ(r.headers["transfer-encoding"], "chunked");
  EXPECT_EQ(r.headers["x-session"], "7");
  EXPECT_EQ(r.body, expected);
  EXPECT_EQ(client.call(verb::get, "/").body, "next");  // the connection serves on
}

TEST(HttpStreams, EventsArriveAsTheyAreSent) {
  http_server server(0);
  std::promise<void> go_on;
  auto go = go_on.get_future().share();
  work_queue work;
  work.run(1);
  server.route_async(http_method::get, "/events", [&](http_request, http_responder r) {
    work.push([r, go] {
      auto s = r.stream(200, "text/event-stream");
      s.event("first");
      go.wait();
      s.event("second");
      s.close();
    });
  });
  server.start();
  int fd = testing::raw_connect(server.port());
  testing::raw_send(fd, get_line(server.port(), "/events"));
  auto got = testing::raw_read_until(fd, "data: first\n\n");
  EXPECT_NE(got.find("data: first\n\n"), std::string::npos) << got;
  EXPECT_EQ(got.find("second"), std::string::npos);
  go_on.set_value();
  got += testing::raw_read_until(fd, "0\r\n\r\n");
  EXPECT_NE(got.find("data: second\n\n\r\n0\r\n\r\n"), std::string::npos) << got;
  ::close(fd);
}

TEST(HttpStreams, NoticesAClientGoingMidStream) {
  http_server server(0);
  std::promise<void> noticed;
  std::atomic<int> sent{0};
  std::promise<void> ended;
  work_queue work;
  work.run(1);
  server.route_async(http_method::get, "/events", [&](http_request, http_responder r) {
    work.push([r, &noticed, &sent, &ended] {
      auto s = r.stream(200, "text/event-stream");
      s.on_disconnect([&noticed] { noticed.set_value(); });
      while (s.event("tick")) {
        ++sent;
        std::this_thread::sleep_for(10ms);
        if (sent > 3000) break;  // 30 s: the test fails below
      }
      EXPECT_TRUE(s.disconnected());
      ended.set_value();
    });
  });
  server.route("/", [](const std::string&) { return http_response(200, "text/plain", "up"); });
  server.start();
  int fd = testing::raw_connect(server.port());
  testing::raw_send(fd, get_line(server.port(), "/events"));
  testing::raw_read_until(fd, "data: tick\n\n");
  const auto start = std::chrono::steady_clock::now();
  ::close(fd);
  EXPECT_EQ(noticed.get_future().wait_for(5s), std::future_status::ready);
  EXPECT_EQ(ended.get_future().wait_for(5s), std::future_status::ready);
  EXPECT_LT(seconds_since(start), 5.0);
  EXPECT_LT(sent.load(), 3000);
  EXPECT_EQ(http_call(server.port(), verb::get, "/").body, "up");
}

TEST(HttpStreams, NoticesAClientGoingBeforeTheAnswer) {
  http_server server(0);
  std::promise<http_responder> taken;
  server.route_async(http_method::post, "/wait",
                     [&](http_request, http_responder r) { taken.set_value(r); });
  server.start();
  int fd = testing::raw_connect(server.port());
  testing::raw_send(fd, "POST /wait HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(server.port()) +
                            "\r\nContent-Length: 2\r\n\r\n{}");
  auto r = taken.get_future().get();
  std::promise<void> noticed;
  r.on_disconnect([&] { noticed.set_value(); });
  EXPECT_FALSE(r.disconnected());
  ::close(fd);
  EXPECT_EQ(noticed.get_future().wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(r.disconnected());
  EXPECT_FALSE(r.respond(http_response(200, "text/plain", "nobody hears")));
  bool late = false;
  r.on_disconnect([&] { late = true; });  // registered after: runs at once
  EXPECT_TRUE(late);
}

TEST(HttpStreams, DroppedRespondersAndStreamsStillEndTheAnswer) {
  http_server server(0);
  server.route_async(http_method::get, "/forgotten", [](http_request, http_responder) {});
  server.route_async(http_method::get, "/left-open", [](http_request, http_responder r) {
    r.stream(200, "text/event-stream").event("only");
  });
  server.start();
  testing::http_client client(server.port());
  auto r = client.call(verb::get, "/forgotten");
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body, "the route did not answer\n");
  r = client.call(verb::get, "/left-open");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "data: only\n\n");
}

TEST(HttpStreams, AClientThatDoesNotReadIsDroppedPastTheQueueLimit) {
  http_server_options o;
  o.stream_queue_limit = 256 << 10;
  http_server server(o);
  std::atomic<size_t> sent{0};
  std::promise<void> done;
  work_queue work;
  work.run(1);
  server.route_async(http_method::get, "/flood", [&](http_request, http_responder r) {
    work.push([r, &sent, &done] {
      auto s = r.stream(200, "application/octet-stream");
      while (sent < (256u << 20) && s.send(std::string(64 << 10, 'f'))) sent += 64 << 10;
      done.set_value();
    });
  });
  server.start();
  int fd = testing::raw_connect(server.port());
  testing::raw_send(fd, get_line(server.port(), "/flood"));  // and never reads
  EXPECT_EQ(done.get_future().wait_for(20s), std::future_status::ready);
  EXPECT_LT(sent.load(), 256u << 20) << "the stream never stopped taking bytes";
  ::close(fd);
}

TEST(HttpStreams, AnHttp10ClientGetsTheStreamUnchunkedThenTheEnd) {
  http_server server(0);
  server.route_async(http_method::get, "/events", [](http_request, http_responder r) {
    auto s = r.stream(200, "text/event-stream");
    s.event("a");
    s.event("b");
    s.close();
  });
  server.start();
  int fd = testing::raw_connect(server.port());
  testing::raw_send(fd, get_line(server.port(), "/events", "1.0"));
  auto got = testing::raw_read_all(fd);  // the server ends the connection
  ::close(fd);
  EXPECT_EQ(got.substr(0, 12), "HTTP/1.0 200") << got;
  EXPECT_EQ(got.find("chunked"), std::string::npos) << got;
  EXPECT_EQ(got.substr(got.find("\r\n\r\n") + 4), "data: a\n\ndata: b\n\n");
}

TEST(HttpStreams, RespondersOutliveTheServerHarmlessly) {
  std::promise<http_responder> taken;
  auto server = std::make_unique<http_server>(0);
  server->route_async(http_method::get, "/wait",
                      [&](http_request, http_responder r) { taken.set_value(r); });
  server->start();
  int fd = testing::raw_connect(server->port());
  testing::raw_send(fd, get_line(server->port(), "/wait"));
  auto r = taken.get_future().get();
  server.reset();  // with the answer pending: the client's connection ends
  EXPECT_EQ(testing::raw_read_all(fd), "");
  ::close(fd);
  EXPECT_FALSE(r.respond(http_response(200, "text/plain", "too late")));
  auto s = r.stream(200, "text/plain");
  EXPECT_FALSE(s.send("x"));
  s.close();
}

TEST(HttpStreams, SixtyFourConcurrentStreamsAreNeitherLostNorMixed) {
  http_server server(0);
  work_queue work;
  work.run(4);
  std::atomic<int> gone{0};
  // Each stream's events go out from the work threads, one event per task, so that the 64
  // streams interleave on the threads and on the I/O thread.
  struct feed {
    http_stream stream;
    std::string id;
    int left;
  };
  std::function<void(std::shared_ptr<feed>)> next = [&](std::shared_ptr<feed> f) {
    if (f->left == 0) return f->stream.close();
    if (!f->stream.event(f->id + ":" + std::to_string(f->left--))) return;
    if (f->left > 100) std::this_thread::sleep_for(1ms);  // a long stream: one its client leaves
    work.push([&next, f] { next(f); });
  };
  server.route_async(http_method::post, "/streams/{id}", [&](http_request req, http_responder r) {
    auto f = std::make_shared<feed>(
        feed{r.stream(200, "text/event-stream"), req.param("id"), std::stoi(req.body)});
    f->stream.on_disconnect([&gone] { ++gone; });
    work.push([&next, f] { next(f); });
  });
  server.start();
  std::vector<std::future<std::string>> clients;
  for (int c = 0; c < 64; ++c) {
    clients.push_back(std::async(std::launch::async, [&server, c] {
      const std::string id = "s" + std::to_string(c);
      if (c % 8 == 7) {  // every eighth client leaves after its first event
        int fd = testing::raw_connect(server.port());
        testing::raw_send(fd, "POST /streams/" + id +
                                  " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(server.port()) +
                                  "\r\nContent-Length: 5\r\n\r\n10000");
        testing::raw_read_until(fd, "\n\n");
        ::close(fd);
        return std::string("left");
      }
      auto r = http_call(server.port(), verb::post, "/streams/" + id, "40");
      std::string expected;
      for (int i = 40; i > 0; --i) expected += "data: " + id + ":" + std::to_string(i) + "\n\n";
      return r.body == expected ? std::string("ok") : r.error + r.body;
    }));
  }
  for (int c = 0; c < 64; ++c) EXPECT_EQ(clients[c].get(), c % 8 == 7 ? "left" : "ok") << c;
  for (int i = 0; i < 500 && gone < 8; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(gone.load(), 8);
}

TEST(HttpStreams, PythonsOwnClientReadsBodiesAndStreams) {
  http_server_options o;
  o.body_limit = 4096;
  http_server server(o);
  work_queue work;
  work.run(1);
  server.route(http_method::post, "/echo/{id}", [](const http_request& r) {
    auto body = nlohmann::json::parse(r.body, nullptr, false);
    if (body.is_discarded())
      return http_response(400, "application/json", "{\"error\": \"body: not JSON\"}");
    return http_response(200, "application/json",
                         nlohmann::json{{"id", r.param("id")}, {"body", body}}.dump());
  });
  server.route_async(http_method::get, "/events", [&work](http_request req, http_responder r) {
    const int n = std::stoi(req.query.substr(req.query.find('=') + 1));
    work.push([r, n] {
      auto s = r.stream(200, "text/event-stream");
      for (int i = 0; i < n; ++i) {
        s.event("tick " + std::to_string(i), "tick");
        std::this_thread::sleep_for(5ms);
      }
      s.close();
    });
  });
  server.start();
  const std::string cmd = std::string("'") + MILESRT_PYTHON + "' '" + MILESRT_SOURCE_DIR +
                          "/test/http/client_check.py' " + std::to_string(server.port()) + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0) << out;
  EXPECT_EQ(out, "ok\n");
}

}  // namespace
}  // namespace milesrt::runtime
