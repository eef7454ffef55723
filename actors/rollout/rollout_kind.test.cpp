// The rollout kind in a graph: a test source of prompts -> rollout -> a test learner that checks
// the groups and publishes versions back; sync and async schedules with the real driver.
#include "actors/rollout/rollout_kind.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <caf/all.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "actors/lib/llm/messages.hpp"
#include "actors/lib/llm/model.hpp"
#include "actors/lib/llm/text_codec.hpp"
#include "milesrt/rollout.capnp.h"
#include "runtime/driver/run.hpp"
#include "runtime/driver/staleness.hpp"
#include "runtime/graph/check_kinds.hpp"
#include "runtime/graph/overrides.hpp"
#include "runtime/graph/validate.hpp"

namespace milesrt::rollout {
using llm::prompt_msg;
using llm::sample_group;
using llm::sample_msg;
using llm::text_codec;
namespace {
namespace fs = std::filesystem;
using namespace milesrt::runtime;

struct seen {
  std::mutex m;
  std::vector<sample_group> groups;
  std::vector<uint64_t> learner_versions;  // the learner's version when it trained each group
};

void register_test_kinds(kind_registry& kinds, std::shared_ptr<seen> log, bool chat) {
  kind_descriptor src;
  src.name = "test_prompts";
  src.role = role::source;
  src.outputs = {{"prompts", "llm.prompt", ""}};
  src.spawn = [chat](caf::actor_system& sys, const actor_setup&) {
    return sys.spawn([chat](caf::stateful_actor<uint64_t>* self) -> caf::behavior {
      return {
          [=](produce_atom, uint64_t n) {
            node_reply r;
            for (uint64_t i = 0; i < n; ++i) {
              uint64_t g = self->state++;
              prompt_msg p;
              p.group_id = g;
              p.label = "label-" + std::to_string(g);
              if (chat) {
                p.messages_json = R"([{"role": "user", "content": "What is )" + std::to_string(g) +
                                  R"( + 2? Answer briefly."}])";
              } else {
                for (int t = 0; t < 11 + int(g % 5); ++t) p.ids.push_back((g * 13 + t * 7) % 128);
              }
              envelope e;
              e.payload = caf::make_message(p);
              r.outputs.push_back({"prompts", e});
            }
            return r;
          },
          [=](snapshot_atom, const std::string&) { return actor_state{}; },
          [=](restore_atom, const std::string&, const actor_state&) { return true; },
      };
    });
  };
  kinds.add(src);

  kind_descriptor learner;
  learner.name = "test_group_learner";
  learner.role = role::learner;
  learner.inputs = {{"groups", "llm.sample_group", ""}};
  learner.outputs = {{"weights", "llm.weights", ""}};
  learner.spawn = [log](caf::actor_system& sys, const actor_setup&) {
    return sys.spawn([log](caf::stateful_actor<uint64_t>* self) -> caf::behavior {
      return {
          [=](train_atom, uint64_t, const std::vector<envelope>& batch) {
            std::lock_guard<std::mutex> lock(log->m);
            for (const auto& e : batch) {
              log->groups.push_back(e.payload.get_as<sample_group>(0));
              log->learner_versions.push_back(self->state);
            }
            train_reply r;
            r.version = ++self->state;
            envelope w;
            w.payload = caf::make_message(r.version);
            w.min_version = w.max_version = r.version;
            r.outputs.push_back({"weights", w});
            return r;
          },
          [=](snapshot_atom, const std::string&) { return actor_state{}; },
          [=](restore_atom, const std::string&, const actor_state&) { return true; },
      };
    });
  };
  kinds.add(learner);
}

class RolloutKind : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("milesrt-rollout-kind-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    auto model =
        llm::decoder::random(R"({"model_type": "qwen3", "vocab_size": 128, "hidden_size": 64,
      "intermediate_size": 96, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
      "head_dim": 16, "rope_theta": 10000.0, "tie_word_embeddings": true, "hidden_act": "silu"})",
                             at::kFloat, at::kCPU, 2);
    model->save(dir_ / "model");
  }
  void TearDown() override { fs::remove_all(dir_); }

  run_outcome run(const std::string& schedule, std::shared_ptr<seen> log, bool chat = false) {
    auto file = dir_ / "g.capnp";
    std::ofstream(file)
        << "@0xb1c2d3e4f5a6b7c8;\nusing import \"/milesrt/graph.capnp\".Graph;\n"
        << "const graph :Graph = (name = \"rollout_test\",\n"
        << "  actors = [(name = \"data\", kind = \"test_prompts\"),\n"
        << "    (name = \"rollout\", kind = \"rollout\", params = (rollout = (model = \""
        << (dir_ / (chat ? "chat_model" : "model")).string()
        << "\", samplesPerPrompt = 4, maxNewTokens = 6, kvBlocks = 64, blockSize = 4"
        << (chat ? ", chatTemplate = \"" + (dir_ / "chat.jinja").string() + "\"" : "") << "))),\n"
        << "    (name = \"trainer\", kind = \"test_group_learner\")],\n"
        << "  edges = [(from = \"data.prompts\", to = \"rollout.prompts\"),\n"
        << "    (from = \"rollout.groups\", to = \"trainer.groups\"),\n"
        << "    (from = \"trainer.weights\", to = \"rollout.weights\")],\n"
        << "  schedule = " << schedule << ",\n"
        << "  run = (steps = 3, batchSize = 2, deadlineSeconds = 120));\n";
    auto loaded = graph::load_graph(file, graph::default_import_dirs());
    EXPECT_TRUE(loaded.ok()) << (loaded.errors.empty() ? "" : loaded.errors[0].text());
    kind_registry kinds;
    register_rollout_kind(kinds);
    register_test_kinds(kinds, log, chat);
    auto errors = graph::validate_kinds(*loaded.graph, kinds);
    EXPECT_TRUE(errors.empty()) << errors[0].text();
    caf::actor_system_config cfg;
    cfg.add_message_types<caf::id_block::milesrt_runtime>();
    kinds.register_types(cfg);
    caf::actor_system sys{cfg};
    run_request req;
    req.run_dir = dir_ / "run";
    req.progress = nullptr;
    return run_graph(sys, *loaded.graph, kinds, req);
  }

  fs::path dir_;
};

TEST_F(RolloutKind, ServesGroupsInLockstep) {
  auto log = std::make_shared<seen>();
  auto o = run("(sync = void)", log);
  ASSERT_TRUE(o.ok) << o.error;
  ASSERT_EQ(log->groups.size(), 6u);
  for (size_t i = 0; i < log->groups.size(); ++i) {
    const auto& g = log->groups[i];
    EXPECT_EQ(g.label, "label-" + std::to_string(g.group_id));
    ASSERT_EQ(g.samples.size(), 4u);
    for (const auto& s : g.samples) {
      EXPECT_EQ(s.prompt, g.samples[0].prompt);
      EXPECT_EQ(s.output.size(), 6u);
      EXPECT_EQ(s.logprobs.size(), 6u);
      // Sync: every token was sampled under the version the learner then trained.
      for (auto v : s.versions) EXPECT_EQ(v, log->learner_versions[i]);
    }
  }
}

TEST_F(RolloutKind, ServesGroupsAsynchronouslyWithinTheBound) {
  auto log = std::make_shared<seen>();
  auto o = run("(async = (maxStaleness = 1, onStale = wait))", log);
  ASSERT_TRUE(o.ok) << o.error;
  ASSERT_EQ(log->groups.size(), 6u);
  for (size_t i = 0; i < log->groups.size(); ++i) {
    for (const auto& s : log->groups[i].samples) {
      for (auto v : s.versions) EXPECT_LE(log->learner_versions[i] - v, 1u);
    }
  }
}

// -- pauseMode = abort: what becomes of the samples a weight update cuts off --------------------

/// A rollout actor of the graph's kind (pauseMode abort, `aborted` as given), talked to directly:
/// a prompt, then round trips that each let it take at least one more engine step (its steps are
/// messages to itself, queued behind what came before), then a new weight version.
class AbortedSamples : public RolloutKind {
 protected:
  struct cut_off {
    node_reply answer;  ///< the answer to the prompt that was in flight at the update
    node_reply after;   ///< the answer to a prompt sent after the update
  };

  cut_off run_cut(const std::string& aborted, int steps_before) {
    auto file = dir_ / "abort.capnp";
    std::ofstream(file)
        << "@0xb1c2d3e4f5a6b7c8;\nusing import \"/milesrt/graph.capnp\".Graph;\n"
        << "const graph :Graph = (name = \"abort_test\",\n"
        << "  actors = [(name = \"data\", kind = \"test_prompts\"),\n"
        << "    (name = \"rollout\", kind = \"rollout\", params = (rollout = (model = \""
        << (dir_ / "model").string()
        << "\", samplesPerPrompt = 4, maxNewTokens = 12, kvBlocks = 64, blockSize = 4, "
        << "pauseMode = abort, aborted = " << aborted << "))),\n"
        << "    (name = \"trainer\", kind = \"test_group_learner\")],\n"
        << "  edges = [(from = \"data.prompts\", to = \"rollout.prompts\"),\n"
        << "    (from = \"rollout.groups\", to = \"trainer.groups\"),\n"
        << "    (from = \"trainer.weights\", to = \"rollout.weights\")]);\n";
    auto loaded = graph::load_graph(file, graph::default_import_dirs());
    EXPECT_TRUE(loaded.ok()) << (loaded.errors.empty() ? "" : loaded.errors[0].text());
    kind_registry kinds;
    register_rollout_kind(kinds);
    register_test_kinds(kinds, std::make_shared<seen>(), false);
    auto errors = graph::validate_kinds(*loaded.graph, kinds);
    EXPECT_TRUE(errors.empty()) << errors[0].text();
    caf::actor_system_config cfg;
    cfg.add_message_types<caf::id_block::milesrt_runtime>();
    kinds.register_types(cfg);
    caf::actor_system sys{cfg};
    auto plan = build_plan(sys, *loaded.graph, kinds, dir_ / "run", nullptr);
    auto rollout = plan.nodes[1].replicas[0];
    auto prompt = [](uint64_t group) {
      prompt_msg p;
      p.group_id = group;
      p.label = "label-" + std::to_string(group);
      for (int t = 0; t < 11; ++t) p.ids.push_back((group * 13 + t * 7) % 128);
      envelope e;
      e.payload = caf::make_message(p);
      return e;
    };
    auto ask = [&](caf::scoped_actor& who, const std::string& port, const envelope& e) {
      return who->request(rollout, caf::infinite, process_atom::value, port, e);
    };
    cut_off out;
    caf::scoped_actor prompter{sys}, self{sys};
    auto pending = ask(prompter, "prompts", prompt(1));
    for (int i = 0; i < steps_before; ++i) {
      self->request(rollout, caf::infinite, snapshot_atom::value, std::string())
          .receive([](actor_state&) {},
                   [](caf::error& err) { ADD_FAILURE() << caf::to_string(err); });
    }
    envelope v1;
    v1.payload = caf::make_message(uint64_t{1});
    v1.min_version = v1.max_version = 1;
    ask(self, "weights", v1)
        .receive([](node_reply&) {}, [](caf::error& err) { ADD_FAILURE() << caf::to_string(err); });
    pending.receive([&](node_reply& r) { out.answer = r; },
                    [](caf::error& err) { ADD_FAILURE() << caf::to_string(err); });
    ask(self, "prompts", prompt(2))
        .receive([&](node_reply& r) { out.after = r; },
                 [](caf::error& err) { ADD_FAILURE() << caf::to_string(err); });
    for (auto& n : plan.nodes)
      for (auto& a : n.replicas) self->send_exit(a, caf::exit_reason::user_shutdown);
    return out;
  }
};

// `drop`: the cut-off group never reaches the trainer: the prompt is answered with nothing (the
// driver counts that as filtered) and the samples and the group are counted; the next prompt
// runs whole under the new version.
TEST_F(AbortedSamples, DropDiscardsTheGroupAndCountsIt) {
  auto cut = run_cut("drop", 4);
  EXPECT_TRUE(cut.answer.outputs.empty());
  EXPECT_EQ(cut.answer.metrics.at("rollout_aborted_samples"), 4.0);
  EXPECT_EQ(cut.answer.metrics.at("rollout_dropped_groups"), 1.0);
  ASSERT_EQ(cut.after.outputs.size(), 1u);
  const auto& g = cut.after.outputs[0].item.payload.get_as<sample_group>(0);
  ASSERT_EQ(g.samples.size(), 4u);
  for (const auto& s : g.samples) {
    EXPECT_EQ(s.finish_reason, "length");
    EXPECT_EQ(s.versions, std::vector<uint64_t>(12, 1));
  }
  EXPECT_EQ(cut.after.metrics.at("rollout_aborted_samples"), 4.0);  // totals since the start
  EXPECT_EQ(cut.after.metrics.at("rollout_dropped_groups"), 1.0);
}

// `resume`: the cut-off samples go on under the new weights and finish whole; each token carries
// the version it was sampled under (both show), and the group's envelope carries its oldest token's
// version, from which the driver counts staleness.
TEST_F(AbortedSamples, ResumeFinishesThemUnderTheNewVersion) {
  auto cut = run_cut("resume", 4);
  ASSERT_EQ(cut.answer.outputs.size(), 1u);
  const auto& e = cut.answer.outputs[0].item;
  const auto& g = e.payload.get_as<sample_group>(0);
  ASSERT_EQ(g.samples.size(), 4u);
  for (const auto& s : g.samples) {
    EXPECT_EQ(s.finish_reason, "length");
    ASSERT_EQ(s.output.size(), 12u);
    ASSERT_EQ(s.versions.size(), 12u);
    ASSERT_EQ(s.logprobs.size(), 12u);
    // The tokens sampled before the update (a few steps' worth: siblings start a step after the
    // first sample) carry version 0, the rest version 1.
    const auto old = std::count(s.versions.begin(), s.versions.end(), 0u);
    EXPECT_GE(old, 3);
    EXPECT_LT(old, 12);
    EXPECT_TRUE(std::is_sorted(s.versions.begin(), s.versions.end()));
    EXPECT_EQ(s.versions.back(), 1u);
  }
  EXPECT_EQ(e.min_version, 0u);
  EXPECT_EQ(e.max_version, 1u);
  EXPECT_EQ(runtime::staleness(1, e.min_version), 1u);  // what the driver applies: from the oldest
  EXPECT_EQ(cut.answer.metrics.at("rollout_aborted_samples"), 4.0);
  EXPECT_EQ(cut.answer.metrics.at("rollout_resumed_samples"), 4.0);
  ASSERT_EQ(cut.after.outputs.size(), 1u);
}

TEST_F(RolloutKind, ParamsAreCheckedBeforeAnythingStarts) {
  auto file = dir_ / "bad.capnp";
  std::ofstream(file)
      << "@0xb1c2d3e4f5a6b7c8;\nusing import \"/milesrt/graph.capnp\".Graph;\n"
      << "const graph :Graph = (actors = [(name = \"data\", kind = \"test_prompts\"),\n"
      << "  (name = \"rollout\", kind = \"rollout\", params = (rollout = ("
      << " temperature = 0, chatTemplate = \"/nonexistent/chat.jinja\", aborted = resume))),\n"
      << "  (name = \"trainer\", kind = \"test_group_learner\")],\n"
      << "  edges = [(from = \"data.prompts\", to = \"rollout.prompts\"),\n"
      << "    (from = \"rollout.groups\", to = \"trainer.groups\")]);\n";
  auto loaded = graph::load_graph(file, graph::default_import_dirs());
  ASSERT_TRUE(loaded.ok());
  kind_registry kinds;
  register_rollout_kind(kinds);
  register_test_kinds(kinds, std::make_shared<seen>(), false);
  std::string all;
  for (const auto& d : graph::validate_kinds(*loaded.graph, kinds)) all += d.text() + "\n";
  const std::string f = file.string() + ": actor 'rollout': params.rollout.";
  EXPECT_NE(all.find(f + "model: required (a Hugging Face model folder)"), std::string::npos)
      << all;
  EXPECT_NE(all.find(f + "temperature: must be > 0"), std::string::npos) << all;
  EXPECT_NE(
      all.find(f + "aborted: resume applies to pauseMode = abort (no other mode cuts samples off)"),
      std::string::npos)
      << all;
  EXPECT_NE(all.find(f + "chatTemplate: '/nonexistent/chat.jinja' is not a file"),
            std::string::npos)
      << all;
}

// Validation refuses what the run could not do (docs/limits.md, "Sampling", "Model folders"):
// samples and tokens past their limits, a missing or corrupt model folder, a KV cache larger
// than the machine's memory; each problem names the field.
TEST_F(RolloutKind, LimitsAndTheModelFolderAreCheckedByValidation) {
  auto problems = [&](const std::string& params) {
    auto file = dir_ / "limits.capnp";
    std::ofstream(file) << "@0xb1c2d3e4f5a6b7c8;\nusing import \"/milesrt/graph.capnp\".Graph;\n"
                        << "const graph :Graph = (actors = [(name = \"data\", kind = "
                           "\"test_prompts\"),\n"
                        << "  (name = \"rollout\", kind = \"rollout\", params = (rollout = ("
                        << params << "))),\n"
                        << "  (name = \"trainer\", kind = \"test_group_learner\")],\n"
                        << "  edges = [(from = \"data.prompts\", to = \"rollout.prompts\"),\n"
                        << "    (from = \"rollout.groups\", to = \"trainer.groups\")]);\n";
    auto loaded = graph::load_graph(file, graph::default_import_dirs());
    EXPECT_TRUE(loaded.ok());
    kind_registry kinds;
    register_rollout_kind(kinds);
    register_test_kinds(kinds, std::make_shared<seen>(), false);
    std::string all;
    for (const auto& d : graph::validate_kinds(*loaded.graph, kinds)) all += d.text() + "\n";
    return all;
  };
  const std::string model = "model = \"" + (dir_ / "model").string() + "\"";
  EXPECT_EQ(problems(model), "");
  auto all = problems(model + ", samplesPerPrompt = 4000000000, maxNewTokens = 4294967295");
  EXPECT_NE(all.find("params.rollout.samplesPerPrompt: must be from 1 to 4096, got 4000000000"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("params.rollout.maxNewTokens: must be from 1 to 1048576, got 4294967295"),
            std::string::npos)
      << all;
  all = problems(model + ", kvBlocks = 4000000000");
  EXPECT_NE(all.find("params.rollout.kvBlocks: 4000000000 blocks of 16 tokens: "),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("exceed the machine's memory"), std::string::npos) << all;
  all = problems("model = \"" + (dir_ / "nonexistent").string() + "\"");
  EXPECT_NE(
      all.find("params.rollout.model: '" + (dir_ / "nonexistent").string() + "' is not a folder"),
      std::string::npos)
      << all;
  fs::create_directories(dir_ / "corrupt");
  std::ofstream(dir_ / "corrupt" / "config.json") << "[1, 2]";
  all = problems("model = \"" + (dir_ / "corrupt").string() + "\"");
  EXPECT_NE(all.find("params.rollout.model: " + (dir_ / "corrupt" / "config.json").string() +
                     ": expected a JSON object"),
            std::string::npos)
      << all;
  // The weights are checked too, before any actor starts: a safetensors file cut short, and one
  // whose tensor has another shape than config.json says.
  fs::create_directories(dir_ / "cut");
  fs::copy_file(dir_ / "model" / "config.json", dir_ / "cut" / "config.json");
  {
    std::ifstream in(dir_ / "model" / "model.safetensors", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(dir_ / "cut" / "model.safetensors", std::ios::binary)
        << bytes.substr(0, bytes.size() / 2);
  }
  all = problems("model = \"" + (dir_ / "cut").string() + "\"");
  EXPECT_NE(all.find("params.rollout.model: " + (dir_ / "cut" / "model.safetensors").string()),
            std::string::npos)
      << all;
  fs::create_directories(dir_ / "reshaped");
  fs::copy_file(dir_ / "model" / "model.safetensors", dir_ / "reshaped" / "model.safetensors");
  {
    std::ifstream in(dir_ / "model" / "config.json");
    auto cfg = nlohmann::json::parse(in);
    cfg["intermediate_size"] = cfg["intermediate_size"].get<int64_t>() * 2;
    std::ofstream(dir_ / "reshaped" / "config.json") << cfg.dump();
  }
  all = problems("model = \"" + (dir_ / "reshaped").string() + "\"");
  EXPECT_NE(all.find("params.rollout.model: " + (dir_ / "reshaped" / "model.safetensors").string() +
                     ": tensor 'model.layers.0."),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("has shape ["), std::string::npos) << all;
}

TEST_F(RolloutKind, EnumParamsAreCheckedByTheCompilerAndSetByName) {
  // A closed set (device, dtype, pauseMode) is a Cap'n Proto enum: a wrong value is a compile
  // error at its position that lists the values; --set takes an enumerant's name.
  auto write = [&](const std::string& name, const std::string& rollout_params) {
    auto file = dir_ / name;
    std::ofstream(file) << "@0xb1c2d3e4f5a6b7c8;\nusing import \"/milesrt/graph.capnp\".Graph;\n"
                        << "const graph :Graph = (actors = [\n"
                        << "  (name = \"rollout\", kind = \"rollout\", params = (rollout = ("
                        << rollout_params << ")))]);\n";
    return file;
  };
  auto errors = [&](const fs::path& file) {
    std::string all;
    for (const auto& d : graph::load_graph(file, graph::default_import_dirs()).errors)
      all += d.text() + "\n";
    return all;
  };
  auto unknown = write("unknown.capnp", "device = tpu");
  EXPECT_EQ(errors(unknown),
            unknown.string() + ":4:70: Not defined: tpu (device is one of: cpu, cuda)\n");
  auto quoted = write("quoted.capnp", "dtype = \"bf16\"");
  EXPECT_EQ(errors(quoted), quoted.string() +
                                ":4:69: Type mismatch; expected Dtype. Dtype is one of: fp32, bf16 "
                                "(written without quotes)\n");

  auto loaded = graph::load_graph(write("ok.capnp", "model = \"m\", dtype = bf16"),
                                  graph::default_import_dirs());
  ASSERT_TRUE(loaded.ok());
  kind_registry kinds;
  register_rollout_kind(kinds);
  auto set = [&](const std::string& a) {
    auto d = graph::apply_override(*loaded.graph, kinds, a);
    return d ? d->text() : std::string("<accepted>");
  };
  EXPECT_EQ(set("rollout.device=cuda"), "<accepted>");
  EXPECT_EQ(set("rollout.pauseMode=inPlace"), "<accepted>");
  EXPECT_EQ(set("rollout.dtype=fp16"), "--set rollout.dtype=fp16: 'fp16' is not one of fp32, bf16");
  EXPECT_EQ(set("rollout.pauseMode=in_place"),
            "--set rollout.pauseMode=in_place: 'in_place' is not one of abort, retract, inPlace");
  auto p = loaded.graph->reader().getActors()[0].getParams().getRollout();
  EXPECT_EQ(p.getDevice(), schema::Device::CUDA);
  EXPECT_EQ(p.getDtype(), schema::Dtype::BF16);  // from the file, kept
  EXPECT_EQ(p.getPauseMode(), schema::RolloutParams::PauseMode::IN_PLACE);
  EXPECT_EQ(std::string(p.getModel()), "m");
}

TEST_F(RolloutKind, RendersChatMessagesWithTheGraphsTemplate) {
  // A random model over the tokenizer the build trains (test/tokenizer_data/qwen3).
  auto model =
      llm::decoder::random(R"({"model_type": "qwen3", "vocab_size": 33520, "hidden_size": 64,
    "intermediate_size": 96, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 16, "rope_theta": 10000.0, "tie_word_embeddings": true, "hidden_act": "silu"})",
                           at::kFloat, at::kCPU, 2);
  model->save(dir_ / "chat_model");
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
    fs::copy_file(fs::path(MILESRT_TOKENIZER_DATA) / "qwen3" / f, dir_ / "chat_model" / f);
  }
  // chatTemplate names a .jinja file: here the Qwen3 template the tokenizer carries, written out.
  {
    std::ifstream cfg(dir_ / "chat_model" / "tokenizer_config.json");
    std::ofstream(dir_ / "chat.jinja")
        << nlohmann::json::parse(cfg).at("chat_template").get<std::string>();
  }
  auto log = std::make_shared<seen>();
  auto o = run("(sync = void)", log, true);
  ASSERT_TRUE(o.ok) << o.error;
  ASSERT_EQ(log->groups.size(), 6u);
  auto loaded = text_codec::load((dir_ / "chat_model").string(), (dir_ / "chat.jinja").string());
  ASSERT_TRUE(loaded.codec) << loaded.error;
  const auto& codec = loaded.codec;
  for (const auto& g : log->groups) {
    auto text = codec->render(R"([{"role": "user", "content": "What is )" +
                              std::to_string(g.group_id) + R"( + 2? Answer briefly."}])");
    EXPECT_NE(text.find("<|im_start|>user\nWhat is "), std::string::npos) << text;
    EXPECT_EQ(g.samples[0].prompt, codec->encode(text));
  }
  // A template file that does not compile is refused when the actor starts, naming file and line.
  std::ofstream(dir_ / "bad.jinja")
      << "{{ bos_token }}\n{% for m in messages %}{{ m.content }\n{% endfor %}";
  auto bad = text_codec::load((dir_ / "chat_model").string(), (dir_ / "bad.jinja").string());
  EXPECT_FALSE(bad.codec);
  EXPECT_NE(bad.error.find((dir_ / "bad.jinja").string() + ": template line 2"), std::string::npos)
      << bad.error;
  auto missing =
      text_codec::load((dir_ / "chat_model").string(), (dir_ / "missing.jinja").string());
  EXPECT_FALSE(missing.codec);
  EXPECT_NE(missing.error.find("missing.jinja: cannot open the chat template (no such file)"),
            std::string::npos)
      << missing.error;
}

// The rollout's `bos` parameter reaches prompts given as text: DeepSeek-V3's LlamaTokenizerFast
// convention (auto) puts BOS first, `never` leaves it out, chat prompts take the template's own.
TEST_F(RolloutKind, TextPromptsGetTheBosPolicy) {
  const std::string dir = std::string(MILESRT_TOKENIZER_DATA) + "/deepseek_v3_bos";
  auto auto_loaded = text_codec::load(dir, "", "auto");
  ASSERT_TRUE(auto_loaded.codec) << auto_loaded.error;
  auto never_loaded = text_codec::load(dir, "", "never");
  ASSERT_TRUE(never_loaded.codec) << never_loaded.error;
  const auto& with_auto = auto_loaded.codec;
  const auto& with_never = never_loaded.codec;
  auto plain = with_never->encode_prompt("hello world");
  ASSERT_FALSE(plain.empty());
  EXPECT_EQ(plain, with_never->encode("hello world"));
  auto ids = with_auto->encode_prompt("hello world");
  ASSERT_EQ(ids.size(), plain.size() + 1);
  EXPECT_EQ(with_auto->decode({ids[0]}), "<｜begin▁of▁sentence｜>");
  EXPECT_TRUE(std::equal(plain.begin(), plain.end(), ids.begin() + 1));
  auto other = text_codec::load(dir, "", "sometimes");
  EXPECT_FALSE(other.codec);
  EXPECT_EQ(other.error, "bos: 'sometimes' is not auto, config or never");
}

}  // namespace
}  // namespace milesrt::rollout
