// The session_server kind in a graph with a real rollout (a random Qwen3 over a real tokenizer)
// and the real math_reward kind, in this process under the real driver, served over loopback
// HTTP: sessions ended without a reward scored by the reward actor against their metadata's
// label; stop strings; streaming token by token (the unmodified `openai` client) and a client
// that leaves mid-stream; 64 concurrent sessions whose tokens and trained samples are each their
// own, exactly once. A learner that records what it is given stands at the end of the graph.
#include <gtest/gtest.h>

#include <caf/all.hpp>
#include <fstream>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "actors/lib/llm/messages.hpp"
#include "actors/lib/llm/recording_learner_testing.hpp"
#include "actors/lib/llm/text_codec.hpp"
#include "actors/lib/llm/tokenizer/tokenizer.hpp"
#include "actors/lib/tasks/math_answer.hpp"
#include "actors/reward/reward_kinds.hpp"
#include "actors/rollout/rollout_kind.hpp"
#include "actors/session_server/session_server_kind.hpp"
#include "runtime/core/interfaces.hpp"
#include "runtime/driver/run.hpp"
#include "runtime/graph/check_kinds.hpp"
#include "runtime/graph/validate.hpp"
#include "runtime/http/http_test_client.hpp"
#include "test/session_model.hpp"
#include "test/support.hpp"

namespace milesrt::testing {
namespace {
using namespace milesrt::runtime;
using json = nlohmann::json;
using verb = boost::beast::http::verb;

using trained = llm::testing::recorded_groups;

const json kQuestion = json::array({{{"role", "user"}, {"content", "What is 2 + 3?"}}});

class SessionGraph : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch(std::string("session-graph-") +
                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
    model_ = session_model_folder(dir_).string();
    tok_ = llm::tokenizer::load(model_).tok;
    register_session_server_kind_for_test();
  }
  void register_session_server_kind_for_test() {
    session_server::register_session_server_kind(kinds_);
    rollout::register_rollout_kind(kinds_);
    reward::register_reward_kinds(kinds_);
    llm::testing::add_recording_learner(kinds_, "recording_learner", log_);  // the graph's end
  }

  /// Runs the graph (`steps` of `batch` groups) in the background; returns the server's port once
  /// the driver's first ask has opened admission.
  uint16_t start(int steps, int batch, int max_new_tokens = 32, const std::string& extra = "") {
    auto file = dir_ / "g.capnp";
    std::ofstream(file)
        << "@0xb1c2d3e4f5a6b7d9;\nusing import \"/milesrt/graph.capnp\".Graph;\n"
        << "const graph :Graph = (name = \"sessions\", actors = [\n"
        << "(name = \"server\", kind = \"session_server\", params = (sessionServer = (model = \""
        << model_ << "\", maxNewTokens = " << max_new_tokens << ", scoreUnrewarded = true" << extra
        << "))),\n"
        << "(name = \"rollout\", kind = \"rollout\", params = (rollout = (model = \"" << model_
        << "\", kvBlocks = 1024))),\n"
        << "(name = \"reward\", kind = \"math_reward\", params = (mathReward = (correct = 1, "
           "wrong = 0.25, noAnswer = 0.5))),\n"
        << "(name = \"learner\", kind = \"recording_learner\")],\n"
        << "edges = [(from = \"server.groups\", to = \"learner.groups\"),\n"
        << "(from = \"server.unscored\", to = \"reward.groups\"),\n"
        << "(from = \"reward.scored\", to = \"learner.groups\"),\n"
        << "(from = \"server.generate\", to = \"rollout.generate\")],\n"
        << "schedule = (sync = void), run = (steps = " << steps << ", batchSize = " << batch
        << ", deadlineSeconds = 60));\n";
    auto loaded = graph::load_graph(file, graph::default_import_dirs());
    EXPECT_TRUE(loaded.ok()) << (loaded.errors.empty() ? "" : loaded.errors[0].text());
    graph_ = std::move(loaded.graph);
    auto problems = graph::validate_kinds(*graph_, kinds_);
    EXPECT_TRUE(problems.empty()) << problems[0].text();
    cfg_.add_message_types<caf::id_block::milesrt_runtime>();
    kinds_.register_types(cfg_);
    sys_ = std::make_unique<caf::actor_system>(cfg_);
    outcome_ = std::async(std::launch::async, [this] {
      run_request req;
      req.run_dir = dir_ / "run";
      req.progress = nullptr;
      return run_graph(*sys_, *graph_, kinds_, req);
    });
    for (int i = 0; i < 600 && !fs::exists(dir_ / "run" / "server.json"); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream in(dir_ / "run" / "server.json");
    port_ = json::parse(in)["port"].get<uint16_t>();
    for (int i = 0; i < 600; ++i) {
      auto h = call(verb::get, "/health");
      if (h.status == 200 && json::parse(h.body)["admitting"].get<bool>()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return port_;
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  runtime::testing::http_reply call(verb method, const std::string& target,
                                    const std::string& body = "") {
    return runtime::testing::http_call(port_, method, target, body,
                                       {{"Content-Type", "application/json"}});
  }
  /// POSTs until the schedule admits it (429 retried); the answer's JSON.
  json post(const std::string& target, const json& body, int status = 200) {
    runtime::testing::http_reply r;
    for (int i = 0; i < 2000; ++i) {
      r = call(verb::post, target, body.dump());
      if (r.status != 429) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_EQ(r.status, status) << target << ": " << r.body << r.error;
    return r.body.empty() ? json() : json::parse(r.body, nullptr, false);
  }
  /// One chat turn of session `id` answering kQuestion (admission waited for).
  json turn(const std::string& id, int max_tokens) {
    return post("/sessions/" + id + "/v1/chat/completions",
                {{"messages", kQuestion}, {"max_tokens", max_tokens}});
  }
  run_outcome finish() {
    auto o = outcome_.get();
    EXPECT_TRUE(o.ok) << o.error;
    return o;
  }
  /// The largest value metric `name` reached in metrics.jsonl.
  double metric_max(const std::string& name) {
    std::stringstream metrics(slurp(dir_ / "run" / "metrics.jsonl"));
    double most = -1;
    for (std::string line; std::getline(metrics, line);) {
      auto m = json::parse(line)["metrics"];
      if (m.contains(name)) most = std::max(most, m[name].get<double>());
    }
    return most;
  }
  std::vector<int64_t> prompt_ids(const std::string& text) {
    auto ids = tok_->encode("<|im_start|>user\n" + text + "<|im_end|>\n<|im_start|>assistant\n");
    return std::vector<int64_t>(ids.begin(), ids.end());
  }

  fs::path dir_;
  std::string model_;
  std::shared_ptr<const llm::tokenizer> tok_;
  kind_registry kinds_;
  std::shared_ptr<trained> log_ = std::make_shared<trained>();
  caf::actor_system_config cfg_;
  std::unique_ptr<graph::loaded_graph> graph_;
  std::unique_ptr<caf::actor_system> sys_;
  std::future<run_outcome> outcome_;
  uint16_t port_ = 0;
};

TEST_F(SessionGraph, SessionsEndedWithoutARewardAreScoredByTheGraphsRewardActor) {
  start(2, 1);
  // Group q1: ended without rewards, labelled: the reward actor scores each session's last turn.
  std::vector<std::string> q1;
  for (int i = 0; i < 2; ++i)
    q1.push_back(post("/sessions", {{"group", "q1"}, {"metadata", {{"label", "5"}}}})["id"]);
  // A label that differs from its group's is refused, naming the field.
  auto clash =
      call(verb::post, "/sessions", json{{"group", "q1"}, {"metadata", {{"label", "6"}}}}.dump());
  EXPECT_EQ(clash.status, 400) << clash.body;
  EXPECT_EQ(json::parse(clash.body)["error"]["param"], "metadata");
  EXPECT_EQ(call(verb::post, "/sessions", R"({"metadata": {"label": 5}})").status, 400);
  for (const auto& id : q1) {
    turn(id, 12);
    post("/sessions/" + id + "/end", json::object());
  }
  // Group q2: rewards given at the end are used as they are.
  std::vector<std::string> q2;
  for (int i = 0; i < 2; ++i) q2.push_back(post("/sessions", {{"group", "q2"}})["id"]);
  for (size_t i = 0; i < q2.size(); ++i) {
    turn(q2[i], 12);
    post("/sessions/" + q2[i] + "/end", {{"reward", 0.125 * double(i + 1)}});
  }
  finish();
  std::lock_guard<std::mutex> lock(log_->m);
  ASSERT_EQ(log_->groups.size(), 2u);
  for (const auto& g : log_->groups) {
    ASSERT_EQ(g.samples.size(), 2u);
    if (g.label == "5") {
      for (const auto& s : g.samples) {
        EXPECT_FALSE(s.text.empty());
        // math_reward's own judgement of the session's last turn against the label.
        EXPECT_EQ(s.reward, float(tasks::math_score(s.text, "5", 1, 0.25, 0.5))) << s.text;
        EXPECT_GE(s.reward, 0.25f);
      }
    } else {
      EXPECT_EQ(g.label, "q2");
      EXPECT_EQ(g.samples[0].reward, 0.125f);
      EXPECT_EQ(g.samples[1].reward, 0.25f);
    }
  }
  EXPECT_EQ(metric_max("session_groups_unscored"), 1.0);
  EXPECT_GE(metric_max("answer_found"), 0.0);  // the reward actor's own metric
}

/// Whether `text` holds one of `stops`.
bool holds_one(const std::string& text, const std::vector<std::string>& stops) {
  for (const auto& s : stops)
    if (text.find(s) != std::string::npos) return true;
  return false;
}

TEST_F(SessionGraph, AStopStringEndsTheTurnAtTheTokenThatCompletedIt) {
  start(1, 1);
  auto loaded = llm::text_codec::load(model_, "", "auto");
  ASSERT_TRUE(loaded.codec) << loaded.error;
  const auto& codec = loaded.codec;
  // Stop strings a random model writes soon: sampling stops at the first token whose text (the
  // output so far, decoded) holds one, and that token is kept, in the answer and the session.
  const std::vector<std::string> stops = {"e", "a", "o", "i"};
  auto a = post("/sessions", {{"group", "t"}})["id"].get<std::string>();
  auto cut =
      post("/sessions/" + a + "/generate",
           {{"input_ids", prompt_ids("Tell me a story.")}, {"max_tokens", 32}, {"stop", stops}});
  auto out = cut["output_ids"].get<std::vector<int64_t>>();
  ASSERT_EQ(cut["finish_reason"], "stop") << cut.dump();
  ASSERT_FALSE(out.empty());
  EXPECT_TRUE(holds_one(codec->decode(out), stops)) << codec->decode(out);
  EXPECT_FALSE(holds_one(codec->decode({out.begin(), out.end() - 1}), stops));
  EXPECT_EQ(json::parse(call(verb::get, "/sessions/" + a).body)["sampled_tokens"], out.size());
  // Chat: the session keeps the sampled tokens before the one in which the first stop string
  // begins, and the reply is their text (so message and tokens agree); the turn is closed with
  // the template's end-of-turn token.
  auto b = post("/sessions", {{"group", "t"}})["id"].get<std::string>();
  auto reply = post("/sessions/" + b + "/v1/chat/completions",
                    {{"messages", kQuestion}, {"max_tokens", 32}, {"stop", stops}});
  ASSERT_EQ(reply["choices"][0]["finish_reason"], "stop") << reply.dump();
  const std::string content = reply["choices"][0]["message"]["content"];
  EXPECT_FALSE(holds_one(content, stops)) << content;
  auto info = json::parse(call(verb::get, "/sessions/" + b + "?tokens=1").body);
  EXPECT_LT(info["sampled_tokens"], reply["usage"]["completion_tokens"]);
  EXPECT_EQ(info["messages"].back()["content"], content);
  std::vector<int64_t> kept;
  for (size_t i = 0; i < info["token_ids"].size(); ++i)
    if (info["loss_mask"][i] == 1) kept.push_back(info["token_ids"][i]);
  EXPECT_EQ(kept.size(), info["sampled_tokens"]);
  const std::string kept_text = codec->decode(kept);
  EXPECT_FALSE(holds_one(kept_text, stops)) << kept_text;
  EXPECT_NE(kept_text.find(content), std::string::npos) << kept_text << " / " << content;
  EXPECT_EQ(info["token_ids"].back(), codec->encode("<|im_end|>").back());
  for (const auto& id : {a, b}) post("/sessions/" + id + "/end", {{"reward", 0.0}});
  finish();
}

TEST_F(SessionGraph, TheOpenAiClientStreamsTokensAsSampledAndALeavingClientsTurnIsDropped) {
  if (std::system(
          ("'" + std::string(MILESRT_PYTHON) + "' -c 'import openai' >/dev/null 2>&1").c_str()) !=
      0)
    GTEST_SKIP() << "the Python package openai is not installed";
  start(1, 1, 256);
  auto out = dir_ / "client.out";
  const std::string cmd = "'" + std::string(MILESRT_PYTHON) + "' '" + source_dir() +
                          "/test/sessions/stream_client.py' " + url() + " >'" + out.string() +
                          "' 2>&1";
  const int raw = std::system(cmd.c_str());
  EXPECT_EQ(WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, 0) << slurp(out);
  EXPECT_NE(slurp(out).find("ok"), std::string::npos) << slurp(out);
  finish();
  // The leaving client's turn was taken back as its connection closed.
  EXPECT_GE(metric_max("session_turns_abandoned"), 1.0);
}

/// One session of the load test, as its client saw it.
struct session_record {
  std::string id;
  std::vector<int64_t> sequence;  ///< every id sent or received, in order
  std::vector<uint8_t> sampled;   ///< per id of `sequence`: the model sampled it
  std::string error;
};

TEST_F(SessionGraph, SixtyFourConcurrentSessionsLoseDuplicateAndMixNothing) {
  constexpr int kSessions = 64, kGroupSize = 4, kTurns = 3;
  start(2, kSessions / kGroupSize / 2);
  std::vector<session_record> records(kSessions);
  auto drive = [&](int i) {
    auto& r = records[size_t(i)];
    runtime::testing::http_client client(port_);
    auto send = [&](const std::string& target, const json& body) {
      for (int attempt = 0; attempt < 3000; ++attempt) {
        auto a =
            client.call(verb::post, target, body.dump(), {{"Content-Type", "application/json"}});
        if (a.status != 429) return a;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      return runtime::testing::http_reply{};
    };
    auto open = send("/sessions", {{"group", "g" + std::to_string(i / kGroupSize)}});
    if (open.status != 200) return void(r.error = "open: " + open.body + open.error);
    r.id = json::parse(open.body)["id"];
    for (int t = 0; t < kTurns; ++t) {
      auto delta = prompt_ids("Session " + std::to_string(i) + ", turn " + std::to_string(t));
      r.sequence.insert(r.sequence.end(), delta.begin(), delta.end());
      r.sampled.insert(r.sampled.end(), delta.size(), 0);
      auto a = send("/sessions/" + r.id + "/generate",
                    {{"input_ids", r.sequence}, {"max_tokens", 6 + (i % 5)}});
      if (a.status != 200) return void(r.error = "turn: " + a.body + a.error);
      auto ids = json::parse(a.body)["output_ids"].get<std::vector<int64_t>>();
      r.sequence.insert(r.sequence.end(), ids.begin(), ids.end());
      r.sampled.insert(r.sampled.end(), ids.size(), 1);
    }
    auto end = send("/sessions/" + r.id + "/end", {{"reward", double(i)}});
    if (end.status != 200) r.error = "end: " + end.body + end.error;
  };
  std::vector<std::thread> clients;
  for (int i = 0; i < kSessions; ++i) clients.emplace_back(drive, i);
  for (auto& c : clients) c.join();
  for (const auto& r : records) ASSERT_TRUE(r.error.empty()) << r.error;
  finish();
  std::lock_guard<std::mutex> lock(log_->m);
  ASSERT_EQ(log_->groups.size(), size_t(kSessions / kGroupSize));
  std::vector<int> seen(kSessions, 0);
  for (const auto& g : log_->groups) {
    ASSERT_EQ(g.samples.size(), size_t(kGroupSize)) << g.label;
    for (const auto& s : g.samples) {
      const int i = int(s.reward);
      ASSERT_TRUE(i >= 0 && i < kSessions && float(i) == s.reward) << s.reward;
      seen[size_t(i)]++;
      EXPECT_EQ(g.label, "g" + std::to_string(i / kGroupSize));  // in its own group
      // Its tokens are its own requests' and its own sampled ids, each marked as such.
      const auto& r = records[size_t(i)];
      std::vector<int64_t> all = s.prompt;
      all.insert(all.end(), s.output.begin(), s.output.end());
      EXPECT_EQ(all, r.sequence) << "session " << i;
      ASSERT_EQ(s.mask.size(), s.output.size());
      EXPECT_TRUE(std::equal(s.mask.begin(), s.mask.end(),
                             r.sampled.begin() + std::ptrdiff_t(s.prompt.size())))
          << "session " << i;
    }
  }
  for (int i = 0; i < kSessions; ++i) EXPECT_EQ(seen[size_t(i)], 1) << "session " << i;
}

TEST_F(SessionGraph, IdleSessionsAreDroppedAndAGroupPastItsWaitTrainsOnItsEndedSessions) {
  start(2, 1, 32, ", idleTimeoutSeconds = 3, groupTimeoutSeconds = 1, partialGroups = true");
  // Group w: one session ends, the other never comes back; after groupTimeoutSeconds the group
  // trains on the ended one, and the other is dropped.
  auto a = post("/sessions", {{"group", "w"}})["id"].get<std::string>();
  auto b = post("/sessions", {{"group", "w"}})["id"].get<std::string>();
  turn(a, 4);
  post("/sessions/" + a + "/end", {{"reward", 1.0}});
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(json::parse(call(verb::get, "/sessions/" + b).body)["state"], "dropped");
  // Idle past idleTimeoutSeconds: dropped, not trained; a late request is told so.
  auto idle = post("/sessions", json::object())["id"].get<std::string>();
  turn(idle, 4);
  std::this_thread::sleep_for(std::chrono::milliseconds(3500));
  EXPECT_EQ(json::parse(call(verb::get, "/sessions/" + idle).body)["state"], "dropped");
  EXPECT_EQ(call(verb::post, "/sessions/" + idle + "/end", "{}").status, 409);
  auto last = post("/sessions", json::object())["id"].get<std::string>();
  turn(last, 4);
  post("/sessions/" + last + "/end", {{"reward", 0.5}});
  finish();
  std::lock_guard<std::mutex> lock(log_->m);
  ASSERT_EQ(log_->groups.size(), 2u);
  EXPECT_EQ(log_->groups[0].label, "w");
  ASSERT_EQ(log_->groups[0].samples.size(), 1u);
  EXPECT_EQ(log_->groups[0].samples[0].reward, 1.0f);
  EXPECT_EQ(log_->groups[1].samples.size(), 1u);
  EXPECT_EQ(metric_max("session_groups_partial"), 1.0);
  EXPECT_EQ(metric_max("sessions_waited_out"), 1.0);
  EXPECT_EQ(metric_max("sessions_idle_dropped"), 1.0);
}

}  // namespace
}  // namespace milesrt::testing
