// The session_server kind in a graph under the real driver, with a scripted generation service
// in place of a rollout: sessions opened in a group, tool-calling turns, the group ended and
// trained on with its mask; the error table; 429 while the schedule admits no new group.
#include "actors/session_server/session_server_testing.hpp"

namespace milesrt::session_server {
namespace {
using namespace milesrt::session_server::testing;
using namespace milesrt::runtime;
using json = nlohmann::json;
using verb = boost::beast::http::verb;
namespace fs = std::filesystem;

TEST_F(SessionServer, AGroupOfToolCallingSessionsEndsAndTrainsWithItsMask) {
  port_ = start(1);
  std::vector<std::string> ids;
  for (int i = 0; i < 2; ++i) {
    auto s = post("/sessions", {{"group", "q1"}});
    ids.push_back(s["id"]);
    EXPECT_EQ(s["base_url"],
              "http://127.0.0.1:" + std::to_string(port_) + "/sessions/" + ids.back() + "/v1");
  }
  for (const auto& id : ids) {
    json messages = user("What is 1 + 2?");
    auto a = chat(id, messages, true);
    ASSERT_EQ(a["choices"][0]["finish_reason"], "tool_calls") << a.dump();
    auto call_msg = a["choices"][0]["message"];
    EXPECT_EQ(call_msg["tool_calls"][0]["function"]["name"], "add");
    messages.push_back(call_msg);
    messages.push_back(
        {{"role", "tool"}, {"tool_call_id", call_msg["tool_calls"][0]["id"]}, {"content", "3"}});
    auto b = chat(id, messages, true);
    EXPECT_EQ(b["choices"][0]["message"]["content"], "The answer is 3.") << b.dump();
    auto info = json::parse(call(verb::get, "/sessions/" + id).body);
    EXPECT_EQ(info["turns"], 2);
  }
  post("/sessions/" + ids[0] + "/end", {{"reward", 1.0}});
  post("/sessions/" + ids[1] + "/end", {{"reward", 0.0}});
  auto o = outcome_.get();
  ASSERT_TRUE(o.ok) << o.error;
  std::lock_guard<std::mutex> lock(log_->m);
  ASSERT_EQ(log_->groups.size(), 1u);
  const auto& g = log_->groups[0];
  ASSERT_EQ(g.samples.size(), 2u);
  EXPECT_EQ(g.label, "q1");
  EXPECT_EQ(g.samples[0].reward, 1.0f);
  for (const auto& s : g.samples) {
    ASSERT_EQ(s.mask.size(), s.output.size());
    ASSERT_EQ(s.logprobs.size(), s.output.size());
    size_t sampled = 0;
    for (size_t i = 0; i < s.mask.size(); ++i) {
      sampled += s.mask[i];
      EXPECT_EQ(s.logprobs[i], s.mask[i] ? -0.5f : 0.0f) << i;
      EXPECT_EQ(s.versions[i], 7u);
    }
    EXPECT_GT(sampled, 0u);
    EXPECT_LT(sampled, s.mask.size());  // the tool's answer is context
    EXPECT_EQ(s.mask.front(), 1);       // the output begins with the first sampled token
  }
}

TEST_F(SessionServer, BadRequestsGetTheirErrorsAndTheServerKeepsServing) {
  port_ = start(2, kModel, ", branching = false");
  EXPECT_EQ(call(verb::get, "/health").status, 200);
  auto r = call(verb::post, "/sessions", "{not json");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(call(verb::post, "/sessions/nope/v1/chat/completions",
                 R"({"messages": [{"role": "user", "content": "hi"}]})")
                .status,
            404);
  auto id = open();
  auto bad = json::parse(call(verb::post, "/sessions/" + id + "/v1/chat/completions",
                              R"({"messages": [{"role": "user", "content": "hi"}], "n": 2})")
                             .body);
  EXPECT_EQ(bad["error"]["param"], "n") << bad.dump();
  EXPECT_EQ(call(verb::post, "/sessions/" + id + "/v1/chat/completions", "[1, 2").status, 400);
  const json messages = user("hi");
  chat(id, messages);
  // Messages that do not extend the session (branching off): 409 naming the first that differs.
  auto c = call(verb::post, "/sessions/" + id + "/v1/chat/completions",
                json{{"messages", json::array({{{"role", "user"}, {"content", "bye"}}})}}.dump());
  EXPECT_EQ(c.status, 409) << c.body;
  EXPECT_EQ(json::parse(c.body)["error"]["index"], 0) << c.body;
  // A second group while the driver's one ask is taken: 429 with Retry-After.
  auto other = open();
  auto busy = call(verb::post, "/sessions/" + other + "/v1/chat/completions",
                   json{{"messages", messages}}.dump());
  EXPECT_EQ(busy.status, 429) << busy.body;
  EXPECT_EQ(busy.headers["retry-after"], "1");
  post("/sessions/" + id + "/end", json::object());
  EXPECT_EQ(call(verb::post, "/sessions/" + id + "/end", "{}").status, 409);
  // After the first step the driver asks again: the other session's turn runs.
  runtime::testing::http_reply later;
  for (int i = 0; i < 100; ++i) {
    later = call(verb::post, "/sessions/" + other + "/v1/chat/completions",
                 json{{"messages", messages}}.dump());
    if (later.status != 429) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(later.status, 200) << later.body;
  EXPECT_EQ(call(verb::get, "/sessions/" + other + "/v1/models").status, 200);
  EXPECT_EQ(call(verb::delete_, "/sessions/" + other).status, 200);
  EXPECT_EQ(call(verb::get, "/sessions/" + other).status, 200);
  auto third = open();
  chat(third, messages);
  post("/sessions/" + third + "/end", {{"reward", 0.5}});
  auto o = outcome_.get();
  ASSERT_TRUE(o.ok) << o.error;
}

TEST_F(SessionServer, RequestsThatCouldPoisonASessionAreRefusedAndTakeNothing) {
  // A model folder with the tokenizer and a config naming the model's vocabulary.
  const auto model = dir_ / "model";
  fs::create_directories(model);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(fs::path(kModel) / f, model / f);
  std::ofstream(model / "config.json") << R"({"model_type": "qwen3", "vocab_size": 33520})";
  port_ = start(1, model.string(), ", maxBranches = 1");
  // Ids carry 128 random bits.
  const auto id = open("g"), other = open("g");
  const std::regex form("s[0-9]+-[0-9a-f]{32}");
  EXPECT_TRUE(std::regex_match(id, form)) << id;
  EXPECT_NE(id.substr(id.find('-')), other.substr(other.find('-')));
  const std::string gen = "/sessions/" + other + "/generate";
  // An id past the model's vocabulary never enters the session.
  auto r = call(verb::post, gen, R"({"input_ids": [1, 2, 33520]})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("vocabulary"), std::string::npos) << r.body;
  // A request the engine refuses: 400, and the session is as before it.
  r = call(verb::post, gen, R"({"input_ids": [1, 2, 3], "max_tokens": 13})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(tokens(other)["token_ids"].size(), 0u);
  r = call(verb::post, gen, R"({"input_ids": [1, 2, 3]})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(tokens(other)["token_ids"].size(), 3u + json::parse(r.body)["output_ids"].size());
  // Another temperature than the trainer's: 400 naming it; the graph's own is fine.
  auto t = call(verb::post, "/sessions/" + id + "/v1/chat/completions",
                json{{"messages", user("hi")}, {"temperature", 0.5}}.dump());
  EXPECT_EQ(t.status, 400) << t.body;
  EXPECT_EQ(json::parse(t.body)["error"]["param"], "temperature") << t.body;
  post("/sessions/" + id + "/v1/chat/completions",
       json{{"messages", user("hi")}, {"temperature", 1.0}});
  // A conflict says it will not go away by retrying: a branch past maxBranches (1).
  auto c = call(verb::post, "/sessions/" + id + "/v1/chat/completions",
                json{{"messages", user("bye")}}.dump());
  EXPECT_EQ(c.status, 409) << c.body;
  EXPECT_EQ(c.headers["x-should-retry"], "false");
  EXPECT_EQ(json::parse(c.body)["error"]["param"], "maxBranches") << c.body;
  // Deep JSON anywhere in a body: 400, the server goes on.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(call(verb::post, "/sessions", "{\"metadata\": " + deep + "}").status, 400);
  EXPECT_EQ(call(verb::post, "/sessions/" + id + "/v1/chat/completions",
                 R"({"messages": [{"role": "user", "content": "x", "extra": )" + deep + "}]}")
                .status,
            400);
  // Invalid UTF-8 in the path: an answer, not a dead server.
  for (auto v : {verb::get, verb::delete_}) EXPECT_EQ(call(v, "/sessions/%FF%FE").status, 404);
  EXPECT_EQ(call(verb::post, "/sessions/%FF/end", "{}").status, 404);
  EXPECT_EQ(call(verb::get, "/health").status, 200);
  post("/sessions/" + id + "/end", {{"reward", 1.0}});
  post("/sessions/" + other + "/end", {{"reward", 0.0}});
  auto o = outcome_.get();
  ASSERT_TRUE(o.ok) << o.error;
}

TEST_F(SessionServer, StoredTokensAreTheTemplatesAndTheSampledOnes) {
  port_ = start(1);
  const auto id = open();
  json messages = user("What is 1 + 2?");
  auto a = chat(id, messages, true);
  messages.push_back(a["choices"][0]["message"]);
  messages.push_back({{"role", "tool"},
                      {"tool_call_id", a["choices"][0]["message"]["tool_calls"][0]["id"]},
                      {"content", "3"}});
  chat(id, messages, true);
  const auto t = tokens(id);
  const auto tok = llm::tokenizer::load(kModel).tok;
  const auto& ids = t["token_ids"];
  ASSERT_EQ(t["loss_mask"].size(), ids.size());
  ASSERT_EQ(t["logprobs"].size(), ids.size());
  std::vector<llm::token_id> all(ids.begin(), ids.end()), sampled;
  for (size_t i = 0; i < ids.size(); ++i)
    if (t["loss_mask"][i] == 1) sampled.push_back(ids[i]);
  // The generator's two replies, in order, are the sampled tokens; the whole is the text of
  // the conversation the client sent.
  EXPECT_EQ(tok->decode(sampled),
            "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n"
            "</tool_call><|im_end|>The answer is 3.<|im_end|>");
  EXPECT_NE(tok->decode(all).find("<tool_response>\n3\n</tool_response>"), std::string::npos);
  // Without ?tokens=1 the answer stays small.
  EXPECT_FALSE(json::parse(call(verb::get, "/sessions/" + id).body).contains("token_ids"));
  post("/sessions/" + id + "/end", {{"reward", 1.0}});
  auto o = outcome_.get();
  ASSERT_TRUE(o.ok) << o.error;
}

TEST_F(SessionServer, AClientThatLeavesMidTurnFreesItAtOnce) {
  port_ = start(1);
  const auto id = open();
  // A turn whose answer comes 3 s late; its client leaves after 300 ms.
  const int fd = runtime::testing::raw_connect(port_);
  ASSERT_GE(fd, 0);
  const std::string body = json{{"messages", user("hi")}, {"max_tokens", 17}}.dump();
  runtime::testing::raw_send(
      fd, "POST /sessions/" + id +
              "/v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_) +
              "\r\n"
              "Content-Type: application/json\r\nContent-Length: " +
              std::to_string(body.size()) + "\r\n\r\n" + body);
  // The turn is under way once the session says so.
  for (int i = 0; i < 100 && json::parse(call(verb::get, "/sessions/" + id).body)["tokens"] == 0;
       ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_GT(json::parse(call(verb::get, "/sessions/" + id).body)["tokens"], 0);
  ::close(fd);
  // The next turn of the session runs at once (no 409), on the session as it was before.
  const auto t0 = std::chrono::steady_clock::now();
  runtime::testing::http_reply r;
  for (int i = 0; i < 40; ++i) {
    r = call(verb::post, "/sessions/" + id + "/v1/chat/completions",
             json{{"messages", user("hello")}}.dump());
    if (r.status != 409) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(2500));
  const auto info = json::parse(call(verb::get, "/sessions/" + id + "?tokens=1").body);
  EXPECT_EQ(info["turns"], 1);
  const auto tok = llm::tokenizer::load(kModel).tok;
  const std::vector<llm::token_id> ids(info["token_ids"].begin(), info["token_ids"].end());
  EXPECT_EQ(tok->decode(ids).find("hi<"), std::string::npos) << tok->decode(ids);
  post("/sessions/" + id + "/end", {{"reward", 1.0}});
  auto o = outcome_.get();
  ASSERT_TRUE(o.ok) << o.error;
  // The late answer was discarded, not appended.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

}  // namespace
}  // namespace milesrt::session_server
