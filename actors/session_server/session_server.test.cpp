// The session_server kind in a graph under the real driver, with a scripted generation service
// in place of a rollout: sessions opened in a group, tool-calling turns, the group ended and
// trained on with its mask; the error table; 429 while the schedule admits no new group.
#include <gtest/gtest.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <deque>
#include <fstream>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>

#include "actors/lib/llm/messages.hpp"
#include "actors/lib/llm/recording_learner_testing.hpp"
#include "actors/lib/llm/tokenizer/tokenizer.hpp"
#include "actors/lib/serving/generate_messages.hpp"
#include "actors/session_server/session_server_kind.hpp"
#include "runtime/core/interfaces.hpp"
#include "runtime/driver/run.hpp"
#include "runtime/graph/check_kinds.hpp"
#include "runtime/graph/validate.hpp"
#include "runtime/http/http_test_client.hpp"

namespace milesrt::session_server {
namespace {
namespace fs = std::filesystem;
using namespace milesrt::runtime;
using json = nlohmann::json;
using verb = boost::beast::http::verb;

const std::string kModel = std::string(MILESRT_TOKENIZER_DATA) + "/qwen3";

using trained = llm::testing::recorded_groups;

/// A generation service that answers from a script: a tool call first, then text.
void register_test_kinds(kind_registry& kinds, std::shared_ptr<trained> log) {
  kind_descriptor gen;
  gen.name = "scripted_generator";
  gen.role = role::stage;
  gen.serves = {{"generate", serving::service_type::generate, ""}};
  gen.spawn = [](caf::actor_system& sys, const actor_setup&) {
    auto tok = llm::tokenizer::load(kModel).tok;
    struct script {
      int turn = 0;
      std::deque<std::pair<caf::typed_response_promise<serving::generation_result>,
                           serving::generation_result>>
          late;
    };
    using late_atom = caf::atom_constant<caf::atom("late")>;
    return sys.spawn([tok](caf::stateful_actor<script>* self) -> caf::behavior {
      return {
          [=](serving::generate_atom,
              const serving::generation_request& req) -> caf::result<serving::generation_result> {
            // The script's other answers, by max_tokens: a refusal as the engine refuses a
            // request it can never serve, and an answer 3 s late (a client may leave meanwhile).
            if (req.max_tokens == 13)
              return caf::make_error(caf::sec::invalid_argument, "scripted: cannot serve this");
            if (req.max_tokens == 17) {
              auto promise = self->make_response_promise<serving::generation_result>();
              serving::generation_result late;
              late.output_ids = {tok->encode("Late.")[0]};
              late.logprobs = {-1.0f};
              late.versions = {7};
              late.finish_reason = "length";
              self->state.late.emplace_back(promise, std::move(late));
              self->delayed_send(self, std::chrono::seconds(3), late_atom::value);
              return promise;
            }
            const char* text =
                self->state.turn++ % 2 == 0
                    ? "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n"
                      "</tool_call><|im_end|>"
                    : "The answer is 3.<|im_end|>";
            serving::generation_result r;
            auto ids = tok->encode(text);
            r.output_ids.assign(ids.begin(), ids.end());
            r.logprobs.assign(r.output_ids.size(), -0.5f);
            r.versions.assign(r.output_ids.size(), 7);
            r.finish_reason = "stop";
            return r;
          },
          [=](late_atom) {
            auto [promise, result] = std::move(self->state.late.front());
            self->state.late.pop_front();
            promise.deliver(std::move(result));
          },
          [=](snapshot_atom, const std::string&) { return actor_state{}; },
          [=](restore_atom, const std::string&, const actor_state&) { return true; },
      };
    });
  };
  kinds.add(gen);

  llm::testing::add_recording_learner(kinds, "group_learner", log);
}

class SessionServer : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("milesrt-session-server-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    register_session_server_kind(kinds_);
    register_test_kinds(kinds_, log_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// Starts the graph (steps of one group each) in the background; returns the server's port.
  uint16_t start(int steps, const std::string& model = kModel) {
    auto file = dir_ / "g.capnp";
    std::ofstream(file) << "@0xb1c2d3e4f5a6b7c8;\nusing import \"/milesrt/graph.capnp\".Graph;\n"
                        << "const graph :Graph = (name = \"sessions\", actors = [\n"
                        << "(name = \"server\", kind = \"session_server\", params = (sessionServer "
                           "= (model = \""
                        << model << "\", maxNewTokens = 64))),\n"
                        << "(name = \"gen\", kind = \"scripted_generator\"),\n"
                        << "(name = \"learner\", kind = \"group_learner\")],\n"
                        << "edges = [(from = \"server.groups\", to = \"learner.groups\"),\n"
                        << "(from = \"server.generate\", to = \"gen.generate\")],\n"
                        << "schedule = (sync = void), run = (steps = " << steps
                        << ", batchSize = 1, deadlineSeconds = 60));\n";
    auto loaded = graph::load_graph(file, graph::default_import_dirs());
    EXPECT_TRUE(loaded.ok()) << (loaded.errors.empty() ? "" : loaded.errors[0].text());
    graph_ = std::move(loaded.graph);
    auto problems = graph::validate_kinds(*graph_, kinds_);
    EXPECT_TRUE(problems.empty()) << problems[0].text();
    cfg_.add_message_types<caf::id_block::milesrt_runtime>();
    cfg_.add_message_types<caf::id_block::milesrt_llm>();
    kinds_.register_types(cfg_);
    sys_ = std::make_unique<caf::actor_system>(cfg_);
    outcome_ = std::async(std::launch::async, [this] {
      run_request req;
      req.run_dir = dir_ / "run";
      req.progress = nullptr;
      return run_graph(*sys_, *graph_, kinds_, req);
    });
    // (Up to a minute: a loaded 2-core machine can take seconds to start the graph.)
    for (int i = 0; i < 1200 && !fs::exists(dir_ / "run" / "server.json"); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream in(dir_ / "run" / "server.json");
    const auto where = json::parse(in, nullptr, false);
    if (where.is_discarded() || !where.contains("port")) {
      ADD_FAILURE() << "the server wrote no server.json in a minute";
      return 0;
    }
    port_ = where["port"].get<uint16_t>();
    // The driver's first ask opens admission.
    for (int i = 0; i < 200; ++i) {
      auto h = call(verb::get, "/health");
      if (h.status == 200 && json::parse(h.body)["admitting"].get<bool>()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return port_;
  }

  runtime::testing::http_reply call(verb method, const std::string& target,
                                    const std::string& body = "") {
    return runtime::testing::http_call(port_, method, target, body,
                                       {{"Content-Type", "application/json"}});
  }
  json post(const std::string& target, const json& body, int status = 200) {
    auto r = call(verb::post, target, body.dump());
    EXPECT_EQ(r.status, status) << target << ": " << r.body << r.error;
    return r.body.empty() ? json() : json::parse(r.body, nullptr, false);
  }

  /// Opens a session (in `group` when given); its id.
  std::string open(const std::string& group = "") {
    auto s = post("/sessions", group.empty() ? json::object() : json{{"group", group}});
    return s.value("id", "");
  }
  /// One chat turn of session `id` over `messages` (with the test's tools when `tools`).
  json chat(const std::string& id, const json& messages, bool tools = false, int status = 200) {
    json body = {{"messages", messages}};
    if (tools) body["tools"] = kTools;
    return post("/sessions/" + id + "/v1/chat/completions", body, status);
  }
  /// The stored sequence of a session (GET ?tokens=1).
  json tokens(const std::string& id) {
    auto r = call(verb::get, "/sessions/" + id + "?tokens=1");
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body, nullptr, false);
  }
  static json user(const std::string& text) {
    return json::array({{{"role", "user"}, {"content", text}}});
  }
  static const json kTools;

  fs::path dir_;
  kind_registry kinds_;
  std::shared_ptr<trained> log_ = std::make_shared<trained>();
  caf::actor_system_config cfg_;
  std::unique_ptr<graph::loaded_graph> graph_;
  std::unique_ptr<caf::actor_system> sys_;
  std::future<run_outcome> outcome_;
  uint16_t port_ = 0;
};

const json SessionServer::kTools = json::array(
    {{{"type", "function"},
      {"function",
       {{"name", "add"},
        {"parameters",
         {{"type", "object"},
          {"properties", {{"a", {{"type", "integer"}}}, {"b", {{"type", "integer"}}}}}}}}}}});

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
  port_ = start(2);
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
  // Messages that do not extend the session: 409 naming the first that differs.
  auto c = call(verb::post, "/sessions/" + id + "/v1/chat/completions",
                json{{"messages", json::array({{{"role", "user"}, {"content", "bye"}}})}}.dump());
  EXPECT_EQ(c.status, 409) << c.body;
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
  port_ = start(1, model.string());
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
  // A conflict says it will not go away by retrying.
  auto c = call(verb::post, "/sessions/" + id + "/v1/chat/completions",
                json{{"messages", user("bye")}}.dump());
  EXPECT_EQ(c.status, 409) << c.body;
  EXPECT_EQ(c.headers["x-should-retry"], "false");
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
