// The environment kind in a graph under the real driver, with a scripted generation service in
// place of a rollout (a rollout is a sibling kind; test/environment.test.cpp runs the real one):
// a group of calculator episodes with a tool call each, trained on with exact masks, log-probs
// and per-token versions; each limit (turns, tokens, time) ending episodes with its counted
// reason; the held-out evaluation with and without the tool; a dead remote failing the run with
// its URL; and the params check.
#include "actors/environment/environment_kind.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <fstream>
#include <mutex>

#include "actors/lib/llm/messages.hpp"
#include "actors/lib/llm/recording_learner_testing.hpp"
#include "actors/lib/llm/tokenizer/tokenizer.hpp"
#include "actors/lib/serving/generate_messages.hpp"
#include "runtime/core/interfaces.hpp"
#include "runtime/driver/run.hpp"
#include "runtime/graph/check_kinds.hpp"
#include "runtime/graph/validate.hpp"

namespace milesrt::environment {
namespace {
namespace fs = std::filesystem;
using namespace milesrt::runtime;

const std::string kModel = std::string(MILESRT_TOKENIZER_DATA) + "/qwen3";
const std::string kCall =
    "<tool_call>\n{\"name\": \"calculate\", \"arguments\": {\"expression\": \"37*86\"}}\n"
    "</tool_call><|im_end|>";
const std::string kAnswer = "The answer is 3182.<|im_end|>";

struct trained : llm::testing::recorded_groups {
  std::vector<metric_map> steps;
};

/// Answers a tool call, then (once the input holds a tool's answer) the answer; `loop`: always
/// the call. The version is 7 for a first turn, 8 after.
caf::behavior generator(caf::event_based_actor*, std::shared_ptr<const llm::tokenizer> tok,
                        bool loop) {
  return {
      [=](serving::generate_atom, const serving::generation_request& req) {
        std::vector<llm::token_id> in(req.input_ids.begin(), req.input_ids.end());
        const bool answered = tok->decode(in).find("<tool_response>") != std::string::npos;
        serving::generation_result r;
        auto ids = tok->encode(answered && !loop ? kAnswer : kCall);
        r.output_ids.assign(ids.begin(), ids.end());
        r.logprobs.assign(r.output_ids.size(), -0.5f);
        r.versions.assign(r.output_ids.size(), answered ? 8 : 7);
        r.finish_reason = "stop";
        return r;
      },
      [=](snapshot_atom, const std::string&) { return actor_state{}; },
      [=](restore_atom, const std::string&, const actor_state&) { return true; },
  };
}

void register_test_kinds(kind_registry& kinds, std::shared_ptr<trained> log) {
  for (bool loop : {false, true}) {
    kind_descriptor gen;
    gen.name = loop ? "looping_generator" : "scripted_generator";
    gen.role = role::stage;
    gen.serves = {{"generate", serving::service_type::generate, ""}};
    gen.spawn = [loop](caf::actor_system& sys, const actor_setup&) {
      return sys.spawn(generator, llm::tokenizer::load(kModel).tok, loop);
    };
    kinds.add(gen);
  }
  kind_descriptor tasks;
  tasks.name = "task_source";
  tasks.role = role::source;
  tasks.outputs = {{"prompts", llm::port_type::prompt, ""}};
  tasks.spawn = [](caf::actor_system& sys, const actor_setup&) {
    return sys.spawn([](caf::stateful_actor<uint64_t>* self) -> caf::behavior {
      return {
          [=](produce_atom, uint64_t n) {
            node_reply r;
            for (uint64_t i = 0; i < n; ++i) {
              llm::prompt_msg p;
              p.group_id = self->state++;
              p.text = "37*86";
              p.label = "3182";
              envelope e;
              e.payload = caf::make_message(std::move(p));
              r.outputs.push_back({"prompts", std::move(e)});
            }
            return r;
          },
          [=](snapshot_atom, const std::string&) { return actor_state{}; },
          [=](restore_atom, const std::string&, const actor_state&) { return true; },
      };
    });
  };
  kinds.add(tasks);
  llm::testing::add_recording_learner(kinds, "group_learner", log);
}

class EnvironmentKind : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("milesrt-environment-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    register_environment_kind(kinds_,
                              std::make_shared<environment_registry>(builtin_environments()));
    register_test_kinds(kinds_, log_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<graph::loaded_graph> load(const std::string& env_params,
                                            const std::string& gen = "scripted_generator",
                                            int steps = 1) {
    auto file = dir_ / "g.capnp";
    std::ofstream(file)
        << "@0xb1c2d3e4f5a6b7c9;\nusing import \"/milesrt/graph.capnp\".Graph;\n"
        << "const graph :Graph = (name = \"env\", actors = [\n"
        << "(name = \"tasks\", kind = \"task_source\"),\n"
        << "(name = \"env\", kind = \"environment\", params = (environment = (model = \"" << kModel
        << "\", " << env_params << "))),\n"
        << "(name = \"gen\", kind = \"" << gen << "\"),\n"
        << "(name = \"learner\", kind = \"group_learner\")],\n"
        << "edges = [(from = \"tasks.prompts\", to = \"env.prompts\"),\n"
        << "(from = \"env.groups\", to = \"learner.groups\"),\n"
        << "(from = \"env.generate\", to = \"gen.generate\")],\n"
        << "schedule = (sync = void), run = (steps = " << steps
        << ", batchSize = 1, deadlineSeconds = 60));\n";
    auto loaded = graph::load_graph(file, graph::default_import_dirs());
    EXPECT_TRUE(loaded.ok()) << (loaded.errors.empty() ? "" : loaded.errors[0].text());
    return std::move(loaded.graph);
  }

  run_outcome run(const std::string& env_params, const std::string& gen = "scripted_generator",
                  int steps = 1) {
    auto g = load(env_params, gen, steps);
    auto problems = graph::validate_kinds(*g, kinds_);
    EXPECT_TRUE(problems.empty()) << problems[0].text();
    caf::actor_system_config cfg;
    cfg.add_message_types<caf::id_block::milesrt_runtime>();
    cfg.add_message_types<caf::id_block::milesrt_llm>();
    kinds_.register_types(cfg);
    caf::actor_system sys(cfg);
    run_request req;
    req.run_dir = dir_ / "run";
    req.progress = nullptr;
    req.on_step = [this](const step_record& s) {
      std::lock_guard<std::mutex> lock(log_->m);
      log_->steps.push_back(s.metrics);
    };
    return run_graph(sys, *g, kinds_, req);
  }

  fs::path dir_;
  kind_registry kinds_;
  std::shared_ptr<trained> log_ = std::make_shared<trained>();
};

TEST_F(EnvironmentKind, AGroupOfToolEpisodesTrainsWithExactMasks) {
  auto o = run("samplesPerPrompt = 2, maxTokens = 4096");
  ASSERT_TRUE(o.ok) << o.error;
  ASSERT_EQ(log_->groups.size(), 1u);
  const auto& g = log_->groups[0];
  EXPECT_EQ(g.label, "3182");
  ASSERT_EQ(g.samples.size(), 2u);
  auto tok = llm::tokenizer::load(kModel).tok;
  const auto call = tok->encode(kCall), answer = tok->encode(kAnswer);
  for (const auto& s : g.samples) {
    EXPECT_EQ(s.reward, 1.0f);
    EXPECT_EQ(s.finish_reason, "done");
    ASSERT_EQ(s.mask.size(), s.output.size());
    ASSERT_EQ(s.versions.size(), s.output.size());
    // The output: the call as sampled, the tool's answer rendered (masked out), the answer.
    const size_t env_tokens = s.output.size() - call.size() - answer.size();
    ASSERT_GT(env_tokens, 0u);
    std::vector<llm::token_id> sampled, middle;
    for (size_t i = 0; i < s.output.size(); ++i) {
      const bool in_call = i < call.size(), in_answer = i >= call.size() + env_tokens;
      EXPECT_EQ(s.mask[i], in_call || in_answer ? 1 : 0) << i;
      EXPECT_EQ(s.logprobs[i], in_call || in_answer ? -0.5f : 0.0f) << i;
      EXPECT_EQ(s.versions[i], in_answer ? 8u : 7u) << i;
      (s.mask[i] ? sampled : middle).push_back(static_cast<llm::token_id>(s.output[i]));
    }
    auto expected = call;
    expected.insert(expected.end(), answer.begin(), answer.end());
    EXPECT_EQ(sampled, expected);
    EXPECT_NE(tok->decode(middle).find("<tool_response>\n3182\n</tool_response>"),
              std::string::npos)
        << tok->decode(middle);
    // The prompt: the user's task after the template's tools block, up to the assistant's turn.
    std::vector<llm::token_id> prompt(s.prompt.begin(), s.prompt.end());
    const std::string p = tok->decode(prompt);
    EXPECT_NE(p.find("\"calculate\""), std::string::npos) << p;
    EXPECT_NE(p.find("<|im_start|>user\n37*86<|im_end|>\n<|im_start|>assistant\n"),
              std::string::npos)
        << p;
  }
  ASSERT_EQ(log_->steps.size(), 1u);
  auto& m = log_->steps[0];
  EXPECT_EQ(m["env_success"], 1.0);
  EXPECT_EQ(m["env_tool_call_rate"], 1.0);
  EXPECT_EQ(m["env_tool_call_success"], 1.0);
  EXPECT_EQ(m["env_ended_done"], 1.0);
  EXPECT_EQ(m["env_turns_mean"], 2.0);
  EXPECT_EQ(m["reward_mean"], 1.0);
}

TEST_F(EnvironmentKind, EachLimitEndsEpisodesWithItsReason) {
  auto o = run("samplesPerPrompt = 2, maxTurns = 3, maxTokens = 4096", "looping_generator");
  ASSERT_TRUE(o.ok) << o.error;
  ASSERT_EQ(log_->groups.size(), 1u);
  for (const auto& s : log_->groups[0].samples) {
    EXPECT_EQ(s.finish_reason, "turns");
    EXPECT_EQ(s.reward, 0.0f);
  }
  EXPECT_EQ(log_->steps[0]["env_ended_turns"], 1.0);
  EXPECT_EQ(log_->steps[0]["env_turns_mean"], 3.0);
  EXPECT_EQ(log_->steps[0]["env_ended_turns_total"], 2.0);
  // Room for the prompt, one call and 3 more tokens: the tool's answer does not fit.
  auto tok = llm::tokenizer::load(kModel).tok;
  const size_t room = log_->groups[0].samples[0].prompt.size() + tok->encode(kCall).size() + 3;

  log_->groups.clear();
  log_->steps.clear();
  o = run("samplesPerPrompt = 1, maxTokens = " + std::to_string(room), "looping_generator");
  ASSERT_TRUE(o.ok) << o.error;
  ASSERT_EQ(log_->groups.size(), 1u);
  EXPECT_EQ(log_->groups[0].samples[0].finish_reason, "tokens");
  EXPECT_EQ(log_->steps[0]["env_ended_tokens"], 1.0);
  EXPECT_EQ(log_->steps[0]["env_turns_mean"], 1.0);

  log_->groups.clear();
  log_->steps.clear();
  o = run("samplesPerPrompt = 1, maxTokens = 4096, maxSeconds = 0.000001", "looping_generator");
  ASSERT_TRUE(o.ok) << o.error;
  EXPECT_EQ(log_->groups[0].samples[0].finish_reason, "time");
  EXPECT_EQ(log_->steps[0]["env_ended_time"], 1.0);
}

TEST_F(EnvironmentKind, EvaluatesHeldOutTasksWithAndWithoutTheTool) {
  const auto tasks = dir_ / "heldout.jsonl";
  std::ofstream(tasks) << "{\"prompt\": \"37*86\", \"label\": \"3182\"}\n"
                       << "{\"prompt\": \"37*86\", \"label\": \"3183\"}\n";
  auto o = run("samplesPerPrompt = 1, maxTokens = 4096, evalData = \"" + tasks.string() +
               "\", evalOptions = \"{\\\"tool\\\": false}\"");
  ASSERT_TRUE(o.ok) << o.error;
  auto& m = log_->steps.at(0);
  EXPECT_EQ(m["eval_env_success"], 0.5);
  EXPECT_EQ(m["eval_env_tool_call_rate"], 1.0);
  EXPECT_EQ(m["eval_env_tool_call_success"], 1.0);
  EXPECT_EQ(m["eval_env_alt_success"], 0.5);
  EXPECT_EQ(m["eval_env_alt_tool_call_success"], 0.0);
}

TEST_F(EnvironmentKind, AnOpeningPastMaxTokensFailsTheRunNamingIt) {
  auto o = run("samplesPerPrompt = 1, maxTokens = 16");
  EXPECT_FALSE(o.ok);
  EXPECT_NE(o.error.find("leaves no room for the model's first turn within maxTokens = 16"),
            std::string::npos)
      << o.error;
}

TEST_F(EnvironmentKind, ADeadRemoteFailsTheRunNamingIt) {
  auto o =
      run("environment = \"remote\", options = \"{\\\"url\\\": \\\"http://127.0.0.1:1\\\", "
          "\\\"timeoutSeconds\\\": 2}\", samplesPerPrompt = 1");
  EXPECT_FALSE(o.ok);
  EXPECT_NE(o.error.find("environment 'remote': remote environment: POST http://127.0.0.1:1/reset"),
            std::string::npos)
      << o.error;
}

TEST_F(EnvironmentKind, TheCheckNamesEachBadParam) {
  auto g = load(
      "environment = \"chess\", samplesPerPrompt = 0, maxSeconds = -1, topP = 2, "
      "evalOptions = \"{\\\"tool\\\": 3}\"");
  auto problems = graph::validate_kinds(*g, kinds_);
  std::string all;
  for (const auto& p : problems) all += p.text() + "\n";
  for (const char* want : {"environment: 'chess' is not one of: calculator, remote",
                           "samplesPerPrompt: must be at least 1", "maxSeconds: must be > 0",
                           "topP: must be in (0, 1]", "evalOptions: needs evalData"})
    EXPECT_NE(all.find(want), std::string::npos) << want << "\n" << all;
  g = load("options = \"{\\\"tool\\\": 3}\"");
  problems = graph::validate_kinds(*g, kinds_);
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems[0].text().find("options (calculator): options.tool: expected true or false"),
            std::string::npos)
      << problems[0].text();
}

}  // namespace
}  // namespace milesrt::environment
