#pragma once
/// The session_server kind in a graph under the real driver, with a scripted generation service
/// in place of a rollout (a tool call, then text, by turns) and a learner that records the groups
/// it trains on: the fixture of the session server's tests.
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

namespace milesrt::session_server::testing {
namespace fs = std::filesystem;
using namespace milesrt::runtime;
using json = nlohmann::json;
using verb = boost::beast::http::verb;

inline const std::string kModel = std::string(MILESRT_TOKENIZER_DATA) + "/qwen3";

using trained = llm::testing::recorded_groups;

/// A generation service that answers from a script: a tool call first, then text.
inline void register_test_kinds(kind_registry& kinds, std::shared_ptr<trained> log) {
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
          [=](serving::generate_atom, const serving::generation_cancel&) {
            // A cancelled late answer comes at once, cut off as the engine cuts it.
            if (self->state.late.empty()) return;
            auto [promise, result] = std::move(self->state.late.front());
            self->state.late.pop_front();
            result.finish_reason = "abort";
            promise.deliver(std::move(result));
          },
          [=](late_atom) {
            if (self->state.late.empty()) return;
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
  uint16_t start(int steps, const std::string& model = kModel, const std::string& extra = "") {
    auto file = dir_ / "g.capnp";
    std::ofstream(file) << "@0xb1c2d3e4f5a6b7c8;\nusing import \"/milesrt/graph.capnp\".Graph;\n"
                        << "const graph :Graph = (name = \"sessions\", actors = [\n"
                        << "(name = \"server\", kind = \"session_server\", params = (sessionServer "
                           "= (model = \""
                        << model << "\", maxNewTokens = 64" << extra << "))),\n"
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
  static const json kTools;  // defined below

  fs::path dir_;
  kind_registry kinds_;
  std::shared_ptr<trained> log_ = std::make_shared<trained>();
  caf::actor_system_config cfg_;
  std::unique_ptr<graph::loaded_graph> graph_;
  std::unique_ptr<caf::actor_system> sys_;
  std::future<run_outcome> outcome_;
  uint16_t port_ = 0;
};

inline const json SessionServer::kTools = json::array(
    {{{"type", "function"},
      {"function",
       {{"name", "add"},
        {"parameters",
         {{"type", "object"},
          {"properties", {{"a", {{"type", "integer"}}}, {"b", {{"type", "integer"}}}}}}}}}}});

}  // namespace milesrt::session_server::testing
