// The remote environment against a real HTTP server on loopback (the runtime's Beast server): a
// "guess the number" environment served over the protocol of docs/environments.md, played to the
// end; then each way a remote can fail (nobody listening, an HTTP error, an answer that is not
// JSON, one that lacks a field) gives an error that names the URL and what was wrong.
#include <gtest/gtest.h>

#include <atomic>
#include <limits>
#include <map>
#include <mutex>

#include "actors/environment/environment.hpp"
#include "runtime/core/untrusted_text.hpp"
#include "runtime/http/http_server.hpp"

namespace milesrt::environment {
namespace {
using runtime::http_method;
using runtime::http_request;
using runtime::http_response;

/// A guessing game: reset asks for the task's number; each step says higher/lower, done when
/// guessed (reward 1). `mode` turns the server bad.
class guess_server {
 public:
  std::string mode = "good";

  guess_server() : http_(0) {
    http_.route(http_method::post, "/env/reset",
                [this](const http_request& r) { return reset(r); });
    http_.route(http_method::post, "/env/step", [this](const http_request& r) { return step(r); });
    http_.start();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(http_.port()) + "/env"; }
  std::vector<json> bodies;

 private:
  http_response reset(const http_request& r) {
    std::lock_guard<std::mutex> lock(m_);
    json b = json::parse(r.body);
    bodies.push_back(b);
    secret_[b["episode_id"]] = std::stoi(b["task"]["label"].get<std::string>());
    json a = {{"messages", {{{"role", "user"}, {"content", b["task"]["prompt"]}}}},
              {"tools", json::array()}};
    return {200, "application/json", a.dump()};
  }
  http_response step(const http_request& r) {
    std::lock_guard<std::mutex> lock(m_);
    if (mode == "500") return {500, "text/plain", "the game crashed"};
    if (mode == "not json") return {200, "text/plain", "<html>oops</html>"};
    if (mode == "not utf8") return {200, "application/json", "{\"messages\": \"\xC3\"}"};
    if (mode == "cut 500") return {500, "text/plain", std::string(199, 'x') + "\xE2\x82\xAC"};
    json b = json::parse(r.body);
    bodies.push_back(b);
    const int guess = std::stoi(b["message"]["content"].get<std::string>());
    const int secret = secret_[b["episode_id"]];
    json a = {{"messages", json::array()},
              {"reward", guess == secret ? 1.0 : 0.0},
              {"done", guess == secret}};
    if (guess != secret)
      a["messages"].push_back({{"role", "user"}, {"content", guess < secret ? "higher" : "lower"}});
    if (mode == "no done") a.erase("done");
    if (mode == "bad messages") a["messages"] = json::array({42});
    if (mode == "huge count") a["tool_calls"] = std::numeric_limits<uint64_t>::max();
    if (mode == "deep") {
      std::string body = a.dump();
      const std::string deep = std::string(100000, '[') + std::string(100000, ']');
      body.insert(body.size() - 1, ", \"extra\": " + deep);
      return {200, "application/json", body};
    }
    return {200, "application/json", a.dump()};
  }

  std::mutex m_;
  std::map<std::string, int> secret_;
  runtime::http_server http_;
};

std::unique_ptr<environment> remote(const std::string& url, double timeout = 5) {
  auto env = make_remote_environment();
  EXPECT_EQ(env->configure({{"url", url}, {"timeoutSeconds", timeout}}), "");
  return env;
}

json say(const std::string& text) { return {{"role", "assistant"}, {"content", text}}; }

TEST(RemoteEnvironment, PlaysAnEpisodeOverHttp) {
  guess_server server;
  auto env = remote(server.url());
  task t{"Guess my number (1-10).", json::array(), "7", 3};
  auto ep = env->open(t, "g3-e0");
  auto o = ep->reset();
  EXPECT_EQ(o.messages[0]["content"], "Guess my number (1-10).");
  EXPECT_TRUE(o.tools.is_array());
  o = ep->step(say("5"));
  EXPECT_FALSE(o.done);
  EXPECT_EQ(o.reward, 0.0);
  EXPECT_EQ(o.messages[0]["content"], "higher");
  o = ep->step(say("7"));
  EXPECT_TRUE(o.done);
  EXPECT_EQ(o.reward, 1.0);
  ASSERT_EQ(server.bodies.size(), 3u);
  EXPECT_EQ(server.bodies[0]["episode_id"], "g3-e0");
  EXPECT_EQ(server.bodies[0]["task"]["label"], "7");
  EXPECT_EQ(server.bodies[2]["message"], say("7"));
}

std::string failure(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(RemoteEnvironment, NamesWhatIsWrongWithTheRemote) {
  guess_server server;
  task t{"Guess.", json::array(), "7", 0};
  auto ep = remote(server.url())->open(t, "e");
  ep->reset();
  const std::string step = "remote environment: POST " + server.url() + "/step";
  server.mode = "500";
  EXPECT_EQ(failure([&] { ep->step(say("5")); }), step + ": HTTP 500: the game crashed");
  server.mode = "not json";
  EXPECT_EQ(failure([&] { ep->step(say("5")); }),
            step + ": the answer is not a JSON object: <html>oops</html>");
  server.mode = "no done";
  EXPECT_EQ(failure([&] { ep->step(say("5")); }),
            "remote environment: " + server.url() + "/step answered: 'done' must be true or false");
  server.mode = "bad messages";
  EXPECT_EQ(failure([&] { ep->step(say("5")); }),
            "remote environment: " + server.url() +
                "/step answered: messages[0] must be an object with a string 'role'");
}

// The server's bytes are not trusted: an answer that is not UTF-8, one 100,000 levels deep, an
// error body whose excerpt would cut a character and a count no uint32 holds are each refused
// naming the URL, in a message that is valid UTF-8.
TEST(RemoteEnvironment, RefusesAnswersItCannotTrust) {
  guess_server server;
  task t{"Guess.", json::array(), "7", 0};
  auto ep = remote(server.url())->open(t, "e");
  ep->reset();
  const std::string step = "remote environment: POST " + server.url() + "/step: ";
  server.mode = "not utf8";
  auto e = failure([&] { ep->step(say("5")); });
  EXPECT_EQ(e, step + "the answer is not valid UTF-8: {\"messages\": \"\xEF\xBF\xBD\"}");
  server.mode = "deep";
  e = failure([&] { ep->step(say("5")); });
  EXPECT_EQ(e.rfind(step + "the answer is JSON nested deeper than 512 levels (at byte ", 0), 0u)
      << e;
  server.mode = "cut 500";
  e = failure([&] { ep->step(say("5")); });
  EXPECT_EQ(e, step + "HTTP 500: " + std::string(199, 'x') + "...");
  EXPECT_TRUE(runtime::valid_utf8(e));
  server.mode = "huge count";
  e = failure([&] { ep->step(say("5")); });
  EXPECT_EQ(e, "remote environment: " + server.url() +
                   "/step answered: 'tool_calls' must be a count (an integer from 0 to "
                   "4294967295)");
}

TEST(RemoteEnvironment, NobodyListening) {
  uint16_t port = 0;
  {
    runtime::http_server closed(0);  // a port that was free a moment ago, closed again
    port = closed.port();
  }
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  task t{"Guess.", json::array(), "7", 0};
  auto e = failure([&] { remote(url, 2)->open(t, "e")->reset(); });
  EXPECT_EQ(e.rfind("remote environment: POST " + url + "/reset: cannot connect: ", 0), 0u) << e;
}

TEST(RemoteEnvironment, BadOptions) {
  auto env = make_remote_environment();
  EXPECT_EQ(env->configure(json::object()),
            "options.url: required (the environment server, http://host:port)");
  EXPECT_EQ(env->configure({{"url", "https://x"}}),
            "options.url: 'https://x': https is not supported (use http://)");
  EXPECT_EQ(env->configure({{"url", "http://x"}, {"timeoutSeconds", 0}}),
            "options.timeoutSeconds: expected a number of seconds in (0, 86400]");
  EXPECT_EQ(env->configure({{"url", "http://x"}, {"retries", 1}}),
            "options.retries: unknown (remote takes: url, timeoutSeconds)");
}

}  // namespace
}  // namespace milesrt::environment
