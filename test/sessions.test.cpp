// End to end: `milesrt run graphs/agent_sessions.capnp` (a session server fronting the rollout,
// the trainer learning from ended session groups) driven over loopback by the unmodified
// `openai` Python package (test/sessions/openai_client.py): chat completions, streaming, tools,
// two sessions per group, bad requests each answered with their 4xx JSON error; every group ended
// is a training step, and the run ends when its steps are done.
#include <nlohmann/json.hpp>

#include "runtime/http/http_test_client.hpp"
#include "test/session_model.hpp"
#include "test/support.hpp"

namespace {
using namespace milesrt::testing;

bool have_openai() {
  return std::system(("'" + std::string(MILESRT_PYTHON) + "' -c 'import openai' >/dev/null 2>&1")
                         .c_str()) == 0;
}

TEST(Sessions, TheOpenAiClientDrivesSessionsThatTrain) {
  // .ci/install brings the openai package; without it this is a skip (the GPU machine has none).
  if (!have_openai()) GTEST_SKIP() << "the Python package openai is not installed";
  auto dir = scratch("sessions");
  const auto model = session_model_folder(dir).string();
  const auto run = dir / "run";
  auto server = start("run graphs/agent_sessions.capnp --quiet --run-dir '" + run.string() +
                          "' --set server.model=" + model + " --set rollout.model=" + model +
                          " --set trainer.model=" + model +
                          " --set run.steps=2 --set run.batchSize=1 --set rollout.kvBlocks=256",
                      "sessions-run");
  for (int i = 0; i < 600 && !fs::exists(run / "server.json") && !server.ended(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(fs::exists(run / "server.json")) << slurp(server.dir / "err");
  const auto url = nlohmann::json::parse(slurp(run / "server.json"))["url"].get<std::string>();
  auto out = scratch("sessions-client");
  const std::string cmd = "'" + std::string(MILESRT_PYTHON) + "' '" + source_dir() +
                          "/test/sessions/openai_client.py' " + url + " 2 >'" +
                          (out / "out").string() + "' 2>&1";
  const int raw = std::system(cmd.c_str());
  EXPECT_EQ(WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, 0) << slurp(out / "out");
  EXPECT_NE(slurp(out / "out").find("ok"), std::string::npos) << slurp(out / "out");
  auto r = server.wait(std::chrono::seconds(120));
  ASSERT_EQ(r.status, 0) << r.err;
  auto summary = nlohmann::json::parse(slurp(run / "summary.json"));
  EXPECT_EQ(summary["steps"], 2);
  // The steps trained on the groups the server handed out, and said so in their metrics.
  std::stringstream metrics(slurp(run / "metrics.jsonl"));
  int steps = 0;
  double complete = 0;
  for (std::string line; std::getline(metrics, line);) {
    auto m = nlohmann::json::parse(line);
    complete = std::max(complete, m["metrics"].value("session_groups_complete", 0.0));
    ++steps;
  }
  EXPECT_GE(complete, 1.0);
  EXPECT_EQ(steps, 2);
}

// Example (b): examples/agent_loop/agent.py, an external agent loop on the `openai` package,
// drives tool-using sessions through `milesrt run examples/agent_loop/agent_loop.capnp` and ends
// them without rewards; the graph's math_reward scores them and the trainer trains on them.
TEST(Sessions, TheAgentLoopExampleTrainsOnItsSessions) {
  if (!have_openai()) GTEST_SKIP() << "the Python package openai is not installed";
  auto dir = scratch("agent-loop");
  const auto model = session_model_folder(dir).string();
  const auto run = dir / "run";
  auto server =
      start("run examples/agent_loop/agent_loop.capnp --quiet --run-dir '" + run.string() +
                "' --set server.model=" + model + " --set rollout.model=" + model +
                " --set trainer.model=" + model + " --set run.steps=2 --set run.batchSize=1",
            "agent-loop-run");
  auto out = scratch("agent-loop-client");
  const std::string cmd = "'" + std::string(MILESRT_PYTHON) + "' '" + source_dir() +
                          "/examples/agent_loop/agent.py' '" + (run / "server.json").string() +
                          "' 2 2 >'" + (out / "out").string() + "' 2>&1";
  const int raw = std::system(cmd.c_str());
  EXPECT_EQ(WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, 0) << slurp(out / "out");
  EXPECT_NE(slurp(out / "out").find("done"), std::string::npos) << slurp(out / "out");
  EXPECT_NE(slurp(out / "out").find("group q1"), std::string::npos) << slurp(out / "out");
  auto r = server.wait(std::chrono::seconds(300));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(run / "summary.json"))["steps"], 2);
  // Both groups went through the reward actor (its metrics) before the trainer.
  std::stringstream metrics(slurp(run / "metrics.jsonl"));
  double unscored = 0;
  int scored_steps = 0;
  for (std::string line; std::getline(metrics, line);) {
    auto m = nlohmann::json::parse(line)["metrics"];
    unscored = std::max(unscored, m.value("session_groups_unscored", 0.0));
    scored_steps += m.contains("answer_found") ? 1 : 0;
  }
  EXPECT_EQ(unscored, 2.0);
  EXPECT_EQ(scored_steps, 2);
}

// scoreUnrewarded sends unrewarded groups out on `unscored`: a graph without an edge from it would
// lose them, so validation refuses it naming the field.
TEST(Sessions, ScoringUnrewardedSessionsNeedsAnEdgeFromUnscored) {
  auto dir = scratch("sessions-validate");
  const auto model = session_model_folder(dir).string();
  const std::string sets = " --set server.model=" + model + " --set rollout.model=" + model +
                           " --set trainer.model=" + model;
  auto bad =
      run_milesrt("validate graphs/agent_sessions.capnp --set server.scoreUnrewarded=true" + sets,
                  "sessions-validate-bad");
  EXPECT_EQ(bad.status, 2) << bad.err;
  EXPECT_NE(bad.err.find("params.sessionServer.scoreUnrewarded: groups with a session ended "
                         "without a reward go out on port 'unscored', which has no edge"),
            std::string::npos)
      << bad.err;
  auto good = run_milesrt("validate graphs/agent_sessions.capnp" + sets, "sessions-validate-good");
  EXPECT_EQ(good.status, 0) << good.err;
}

// Every turn is sampled at the temperature the trainer scores with: the graph refuses a server
// whose temperature differs from the trainer's, the server refuses a request naming another, and
// at 0.7 everywhere the trainer's first log-probs equal the engine's (the importance ratios are
// 1; a turn sampled at 0.5 and scored at 0.7 differs by nats).
TEST(Sessions, TurnsAreSampledAtTheTrainersTemperature) {
  auto dir = scratch("sessions-temperature");
  const auto model = session_model_folder(dir).string();
  const std::string sets = " --set server.model=" + model + " --set rollout.model=" + model +
                           " --set trainer.model=" + model;
  auto bad = run_milesrt("validate graphs/agent_sessions.capnp --set server.temperature=0.5" + sets,
                         "sessions-temperature-bad");
  EXPECT_EQ(bad.status, 2) << bad.err;
  EXPECT_NE(bad.err.find("temperature"), std::string::npos) << bad.err;
  const auto run = dir / "run";
  auto server =
      start("run graphs/agent_sessions.capnp --quiet --run-dir '" + run.string() + "'" + sets +
                " --set server.temperature=0.7 --set rollout.temperature=0.7"
                " --set trainer.temperature=0.7 --set run.steps=1 --set run.batchSize=1"
                " --set rollout.kvBlocks=256",
            "sessions-temperature-run");
  for (int i = 0; i < 600 && !fs::exists(run / "server.json") && !server.ended(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(fs::exists(run / "server.json")) << slurp(server.dir / "err");
  const auto port = nlohmann::json::parse(slurp(run / "server.json"))["port"].get<uint16_t>();
  using verb = boost::beast::http::verb;
  auto call = [&](const std::string& target, const nlohmann::json& body) {
    return milesrt::runtime::testing::http_call(port, verb::post, target, body.dump(),
                                                {{"Content-Type", "application/json"}});
  };
  // The driver's first ask opens admission.
  for (int i = 0; i < 600; ++i) {
    auto h = milesrt::runtime::testing::http_call(port, verb::get, "/health");
    if (h.status == 200 && nlohmann::json::parse(h.body)["admitting"].get<bool>()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const auto id = nlohmann::json::parse(call("/sessions", {{"group", "t"}}).body)["id"];
  const std::string chat = "/sessions/" + id.get<std::string>() + "/v1/chat/completions";
  const nlohmann::json messages = {{{"role", "user"}, {"content", "What is 2+2?"}}};
  auto refused = call(chat, {{"messages", messages}, {"temperature", 0.5}, {"max_tokens", 8}});
  EXPECT_EQ(refused.status, 400) << refused.body;
  auto turn = call(chat, {{"messages", messages}, {"temperature", 0.7}, {"max_tokens", 8}});
  EXPECT_EQ(turn.status, 200) << turn.body;
  auto answer = nlohmann::json::parse(turn.body)["choices"][0]["message"];
  nlohmann::json next = messages;
  next.push_back(answer);
  next.push_back({{"role", "user"}, {"content", "And 3+3?"}});
  auto second = call(chat, {{"messages", next}, {"max_tokens", 8}});
  EXPECT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(call("/sessions/" + id.get<std::string>() + "/end", {{"reward", 1.0}}).status, 200);
  auto r = server.wait(std::chrono::seconds(120));
  ASSERT_EQ(r.status, 0) << r.err;
  std::stringstream metrics(slurp(run / "metrics.jsonl"));
  std::string line;
  ASSERT_TRUE(std::getline(metrics, line));
  const auto m = nlohmann::json::parse(line)["metrics"];
  ASSERT_TRUE(m.contains("train_rollout_logprob_abs_diff_max")) << line;
  EXPECT_LT(m["train_rollout_logprob_abs_diff_max"].get<double>(), 1e-4) << line;
}

}  // namespace
