// The reward kinds as real actors: math_reward on a hand-built group, remote_reward against an
// HTTP server on loopback (success, retry after a 5xx, malformed answer, wrong count, timeout,
// refused connection).
#include "actors/reward/reward_kinds.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "milesrt/reward.capnp.h"
#include "runtime/core/untrusted_text.hpp"
#include "runtime/testing/kind_testing.hpp"

namespace milesrt::reward {
namespace {
using namespace milesrt::runtime;
using namespace milesrt::kind_testing;
using llm::sample_group;
using llm::sample_msg;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

/// An HTTP server on 127.0.0.1 (a free port), one connection at a time, on a thread of its own.
/// The handler maps a request body to (status, answer body).
class loopback_server {
 public:
  using handler = std::function<std::pair<unsigned, std::string>(const std::string&)>;

  explicit loopback_server(handler h)
      : handler_(std::move(h)), acceptor_(ioc_, {boost::asio::ip::address_v4::loopback(), 0}) {
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] { serve(); });
  }
  ~loopback_server() {
    stop_ = true;
    boost::system::error_code ec;
    tcp::socket wake(ioc_);
    wake.connect({boost::asio::ip::address_v4::loopback(), port_}, ec);  // unblocks accept
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/score"; }
  int requests() const { return requests_; }
  std::string last_body() const {
    std::lock_guard<std::mutex> lock(m_);
    return last_body_;
  }

 private:
  void serve() {
    while (!stop_) {
      tcp::socket socket(ioc_);
      boost::system::error_code ec;
      acceptor_.accept(socket, ec);
      if (stop_) return;
      if (ec) continue;
      boost::beast::flat_buffer buffer;
      http::request<http::string_body> req;
      http::read(socket, buffer, req, ec);
      if (ec) continue;
      ++requests_;
      {
        std::lock_guard<std::mutex> lock(m_);
        last_body_ = req.body();
      }
      auto [status, body] = handler_(req.body());
      http::response<http::string_body> res{static_cast<http::status>(status), 11};
      res.set(http::field::content_type, "application/json");
      res.body() = body;
      res.prepare_payload();
      http::write(socket, res, ec);
      socket.shutdown(tcp::socket::shutdown_both, ec);
    }
  }

  handler handler_;
  boost::asio::io_context ioc_;
  tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  mutable std::mutex m_;
  std::string last_body_;
  std::thread thread_;
};

sample_msg sample(std::string text, std::vector<int64_t> output = {}) {
  sample_msg s;
  s.prompt = {1, 2, 3};
  s.output = std::move(output);
  s.text = std::move(text);
  return s;
}

class RewardKinds : public ::testing::Test {
 protected:
  RewardKinds() {
    register_reward_kinds(kinds_);
    system_ = std::make_unique<test_system>(kinds_);
  }
  caf::actor_system& sys() { return system_->sys(); }

  caf::actor spawn_remote(const std::string& url, double timeout, uint32_t retries) {
    params_of<schema::RemoteRewardParams> p;
    p->setUrl(url);
    p->setTimeoutSeconds(timeout);
    p->setRetries(retries);
    p->setBackoffSeconds(0.01);
    return kinds_.find("remote_reward")->spawn(sys(), p.setup());
  }

  /// The error text of a process request that is expected to fail.
  std::string failure(const caf::actor& a, const sample_group& g) {
    auto reply = ask<node_reply>(sys(), a, process_atom::value, std::string("groups"), wrap(g));
    if (reply) return "<no error>";
    return sys().render(reply.error());
  }

  static sample_group three_samples() {
    return sample_group{
        7, "12", {sample("a", {5}), sample("bb", {6, 7}), sample("ccc", {8, 9, 10})}};
  }

  kind_registry kinds_;
  std::unique_ptr<test_system> system_;
};

TEST_F(RewardKinds, MathRewardScoresEachSampleAgainstTheLabel) {
  params_of<schema::MathRewardParams> p;
  p->setCorrect(1);
  p->setWrong(-0.5);
  p->setNoAnswer(-1);
  auto a = kinds_.find("math_reward")->spawn(sys(), p.setup());
  sample_group g{3,
                 "12",
                 {sample("so \\boxed{12}"), sample("The answer is 13."), sample("no idea"),
                  sample("Answer: 12.0")}};
  auto reply =
      ask<node_reply>(sys(), a, process_atom::value, std::string("groups"), wrap(g, 42, 4, 6));
  ASSERT_TRUE(reply) << sys().render(reply.error());
  ASSERT_EQ(reply->outputs.size(), 1u);
  const auto& out = reply->outputs[0];
  EXPECT_EQ(out.port, "scored");
  EXPECT_EQ(out.item.origin, 42u);
  EXPECT_EQ(out.item.min_version, 4u);
  EXPECT_EQ(out.item.max_version, 6u);
  auto scored = out.item.payload.get_as<sample_group>(0);
  EXPECT_EQ(scored.group_id, 3u);
  ASSERT_EQ(scored.samples.size(), 4u);
  EXPECT_EQ(scored.samples[0].reward, 1.0f);
  EXPECT_EQ(scored.samples[1].reward, -0.5f);
  EXPECT_EQ(scored.samples[2].reward, -1.0f);
  EXPECT_EQ(scored.samples[3].reward, 1.0f);
  EXPECT_EQ(scored.samples[0].text, "so \\boxed{12}");
  EXPECT_DOUBLE_EQ(reply->metrics.at("accuracy"), 0.5);
  EXPECT_DOUBLE_EQ(reply->metrics.at("answer_found"), 0.75);
  EXPECT_DOUBLE_EQ(reply->metrics.at("reward_mean"), 0.125);
  // Rewards 1, -0.5, -1, 1 around 0.125: variance (0.765625 + 0.390625 + 1.265625 + 0.765625) / 4.
  EXPECT_NEAR(reply->metrics.at("reward_std"), std::sqrt(3.1875 / 4), 1e-6);

  auto wrong =
      ask<node_reply>(sys(), a, process_atom::value, std::string("groups"), wrap(uint64_t{5}));
  ASSERT_FALSE(wrong);
  EXPECT_NE(sys().render(wrong.error()).find("math_reward: port 'groups' expects a sample_group"),
            std::string::npos);
}

TEST_F(RewardKinds, RemoteRewardAsksTheServer) {
  loopback_server server([](const std::string& body) {
    auto j = nlohmann::json::parse(body);
    nlohmann::json rewards = nlohmann::json::array();
    for (const auto& s : j["samples"]) rewards.push_back(0.5 * double(s["output_ids"].size()));
    return std::make_pair(200u, nlohmann::json{{"rewards", rewards}}.dump());
  });
  auto a = spawn_remote(server.url(), 5, 0);
  auto reply = ask<node_reply>(sys(), a, process_atom::value, std::string("groups"),
                               wrap(three_samples(), 9, 1, 2));
  ASSERT_TRUE(reply) << sys().render(reply.error());
  ASSERT_EQ(reply->outputs.size(), 1u);
  EXPECT_EQ(reply->outputs[0].port, "scored");
  EXPECT_EQ(reply->outputs[0].item.origin, 9u);
  EXPECT_EQ(reply->outputs[0].item.max_version, 2u);
  auto scored = reply->outputs[0].item.payload.get_as<sample_group>(0);
  ASSERT_EQ(scored.samples.size(), 3u);
  EXPECT_EQ(scored.samples[0].reward, 0.5f);
  EXPECT_EQ(scored.samples[1].reward, 1.0f);
  EXPECT_EQ(scored.samples[2].reward, 1.5f);
  EXPECT_DOUBLE_EQ(reply->metrics.at("reward_mean"), 1.0);
  auto sent = nlohmann::json::parse(server.last_body());
  EXPECT_EQ(sent["label"], "12");
  EXPECT_EQ(sent["group_id"], 7);
  EXPECT_EQ(sent["samples"][2]["text"], "ccc");
  EXPECT_EQ(sent["samples"][2]["output_ids"], nlohmann::json({8, 9, 10}));
  EXPECT_EQ(sent["samples"][0]["prompt_ids"], nlohmann::json({1, 2, 3}));
}

TEST_F(RewardKinds, RemoteRewardRetriesAfterAServerError) {
  std::atomic<int> calls{0};
  loopback_server server([&](const std::string&) {
    if (calls++ == 0) return std::make_pair(503u, std::string("busy"));
    return std::make_pair(200u, std::string(R"({"rewards": [1, 0, 1]})"));
  });
  auto a = spawn_remote(server.url(), 5, 2);
  auto reply =
      ask<node_reply>(sys(), a, process_atom::value, std::string("groups"), wrap(three_samples()));
  ASSERT_TRUE(reply) << sys().render(reply.error());
  EXPECT_EQ(server.requests(), 2);
  EXPECT_EQ(reply->outputs[0].item.payload.get_as<sample_group>(0).samples[1].reward, 0.0f);
}

TEST_F(RewardKinds, RemoteRewardReportsAMalformedAnswerWithoutRetrying) {
  loopback_server server(
      [](const std::string&) { return std::make_pair(200u, std::string("{rewards: oops")); });
  auto error = failure(spawn_remote(server.url(), 5, 3), three_samples());
  EXPECT_NE(error.find("remote_reward: POST " + server.url() +
                       ": the answer is not JSON: '{rewards: oops'"),
            std::string::npos)
      << error;
  EXPECT_EQ(server.requests(), 1);
}

// An answer's bytes are not trusted: not UTF-8 (or an error body cut inside a character) and
// 100,000-deep JSON are refused naming the URL, and the message is valid UTF-8 whatever came.
TEST_F(RewardKinds, RemoteRewardRefusesBytesThatAreNotUtf8OrNestTooDeep) {
  std::string answer;
  unsigned status = 200;
  loopback_server server([&](const std::string&) { return std::make_pair(status, answer); });
  auto a = spawn_remote(server.url(), 5, 0);
  const std::string where = "remote_reward: POST " + server.url() + ": ";
  answer = "[1, 2, 3] \xff\xfe";
  auto error = failure(a, three_samples());
  EXPECT_NE(
      error.find(where + "the answer is not valid UTF-8: '[1, 2, 3] \xEF\xBF\xBD\xEF\xBF\xBD'"),
      std::string::npos)
      << error;
  EXPECT_TRUE(runtime::valid_utf8(error)) << error;

  answer = "{\"rewards\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  error = failure(a, three_samples());
  EXPECT_NE(error.find(where + "the answer is JSON nested deeper than 512 levels (at byte 523)"),
            std::string::npos)
      << error;

  // A 4xx body whose 200-byte excerpt would cut a 3-byte character: the cause is quoted, whole.
  status = 404;
  answer = std::string(199, 'x') + "\xE2\x82\xAC" + std::string(50, 'y');
  error = failure(a, three_samples());
  EXPECT_NE(error.find(where + "HTTP 404: " + std::string(199, 'x') + "..."), std::string::npos)
      << error;
  EXPECT_TRUE(runtime::valid_utf8(error)) << error;
}

TEST_F(RewardKinds, RemoteRewardRefusesARewardNoFloatHolds) {
  loopback_server server([](const std::string&) {
    return std::make_pair(200u, std::string(R"({"rewards": [1, 1e300, 0]})"));
  });
  auto error = failure(spawn_remote(server.url(), 5, 0), three_samples());
  EXPECT_NE(error.find("POST " + server.url() + ": rewards[1] is 1e+300, not a finite float"),
            std::string::npos)
      << error;
}

TEST_F(RewardKinds, RemoteRewardRefusesANumberPastADouble) {
  loopback_server server([](const std::string&) {
    return std::make_pair(200u, std::string(R"({"rewards": [1, 1e400, 0]})"));
  });
  auto error = failure(spawn_remote(server.url(), 5, 0), three_samples());
  EXPECT_NE(
      error.find("POST " + server.url() + ": the answer holds a number that overflows a double"),
      std::string::npos)
      << error;
}

TEST_F(RewardKinds, RemoteRewardReportsAWrongCount) {
  loopback_server server([](const std::string&) {
    return std::make_pair(200u, std::string(R"({"rewards": [1, 2]})"));
  });
  auto error = failure(spawn_remote(server.url(), 5, 0), three_samples());
  EXPECT_NE(error.find("POST " + server.url() + ": the answer has 2 rewards for 3 samples"),
            std::string::npos)
      << error;
}

TEST_F(RewardKinds, RemoteRewardTimesOut) {
  loopback_server server([](const std::string&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    return std::make_pair(200u, std::string(R"({"rewards": [1, 2, 3]})"));
  });
  const auto start = std::chrono::steady_clock::now();
  auto error = failure(spawn_remote(server.url(), 0.2, 1), three_samples());
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(error.find("POST " + server.url() + ": timed out after 0.2s"), std::string::npos)
      << error;
  EXPECT_NE(error.find("(2 attempts)"), std::string::npos) << error;
  EXPECT_LT(took, 0.75);  // two attempts of 0.2 s, not the server's 0.8 s
}

TEST_F(RewardKinds, RemoteRewardReportsARefusedConnection) {
  std::string url;
  {
    loopback_server closed([](const std::string&) { return std::make_pair(200u, std::string()); });
    url = closed.url();
  }
  auto error = failure(spawn_remote(url, 1, 1), three_samples());
  EXPECT_NE(error.find("POST " + url + ": cannot connect: "), std::string::npos) << error;
  EXPECT_NE(error.find("(2 attempts)"), std::string::npos) << error;
}

TEST_F(RewardKinds, ChecksTheirParams) {
  const auto* remote = kinds_.find("remote_reward");
  ASSERT_NE(remote, nullptr);
  params_of<schema::RemoteRewardParams> p;
  auto problems = remote->check_params(capnp::toDynamic((*p).asReader()));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].text(), "url: required (http://host:port/path)");
  p->setUrl("https://example.com/r");
  p->setTimeoutSeconds(0);
  problems = remote->check_params(capnp::toDynamic((*p).asReader()));
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0].text(),
            "url: 'https://example.com/r': https is not supported (use http://)");
  EXPECT_EQ(problems[1].text(), "timeoutSeconds: must be > 0");
  const auto* math = kinds_.find("math_reward");
  ASSERT_NE(math, nullptr);
  EXPECT_EQ(math->inputs[0].type, "llm.sample_group");
  EXPECT_EQ(math->outputs[0].type, "llm.scored_group");
  EXPECT_EQ(math->params_member, "mathReward");
  EXPECT_EQ(remote->params_member, "remoteReward");
}

}  // namespace
}  // namespace milesrt::reward
