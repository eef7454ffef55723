// data -> (a test sampler) -> math_reward -> group_filter -> (a test learner), from a graph file
// through validation and the real schedule driver: the params members, the port types, and the
// driver sampling more prompts while the filter drops groups.
#include <gtest/gtest.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <fstream>
#include <mutex>

#include "actors/buffer/group_filter_kind.hpp"
#include "actors/data/data_kind.hpp"
#include "actors/lib/llm/messages.hpp"
#include "actors/reward/reward_kinds.hpp"
#include "runtime/driver/run.hpp"
#include "runtime/graph/check_kinds.hpp"
#include "runtime/graph/validate.hpp"

namespace milesrt::buffer {
namespace {
namespace fs = std::filesystem;
using namespace milesrt::runtime;
using llm::prompt_msg;
using llm::sample_group;

struct trained {
  std::mutex m;
  std::vector<sample_group> groups;
};

/// test_sampler: 4 samples per prompt, two right and two wrong; every third group all right.
/// test_scored_learner: keeps what it trains on.
void register_test_kinds(kind_registry& kinds, std::shared_ptr<trained> log) {
  kind_descriptor sampler;
  sampler.name = "test_sampler";
  sampler.role = role::stage;
  sampler.inputs = {{"prompts", "llm.prompt", ""}};
  sampler.outputs = {{"groups", "llm.sample_group", ""}};
  sampler.spawn = [](caf::actor_system& sys, const actor_setup&) {
    return sys.spawn([]() -> caf::behavior {
      return {
          [](process_atom, const std::string&, const envelope& e) {
            const auto& p = e.payload.get_as<prompt_msg>(0);
            sample_group g{p.group_id, p.label, {}};
            for (int i = 0; i < 4; ++i) {
              llm::sample_msg s;
              const bool right = p.group_id % 3 == 0 || i % 2 == 0;
              s.text = "so the answer is \\boxed{" + (right ? p.label : p.label + "1") + "}";
              g.samples.push_back(s);
            }
            envelope out = e;
            out.payload = caf::make_message(std::move(g));
            node_reply r;
            r.outputs.push_back({"groups", std::move(out)});
            return r;
          },
          [](snapshot_atom, const std::string&) { return actor_state{}; },
          [](restore_atom, const std::string&, const actor_state&) { return true; },
      };
    });
  };
  kinds.add(sampler);

  kind_descriptor learner;
  learner.name = "test_scored_learner";
  learner.role = role::learner;
  learner.inputs = {{"groups", "llm.scored_group", ""}};
  learner.spawn = [log](caf::actor_system& sys, const actor_setup&) {
    return sys.spawn([log](caf::stateful_actor<uint64_t>* self) -> caf::behavior {
      return {
          [=](train_atom, uint64_t, const std::vector<envelope>& batch) {
            std::lock_guard<std::mutex> lock(log->m);
            for (const auto& e : batch) log->groups.push_back(e.payload.get_as<sample_group>(0));
            train_reply r;
            r.version = ++self->state;
            return r;
          },
          [](snapshot_atom, const std::string&) { return actor_state{}; },
          [](restore_atom, const std::string&, const actor_state&) { return true; },
      };
    });
  };
  kinds.add(learner);
}

TEST(ScoringGraph, TrainsOnlyOnGroupsWithASignal) {
  const fs::path dir =
      fs::temp_directory_path() / ("milesrt-scoring-graph-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    std::ofstream data(dir / "d.jsonl");
    for (int i = 0; i < 10; ++i) data << R"({"prompt": "q)" << i << R"(", "label": )" << i << "}\n";
  }
  std::ofstream(dir / "g.capnp")
      << "@0xb1c2d3e4f5a6b7c9;\nusing import \"/milesrt/graph.capnp\".Graph;\n"
      << "const graph :Graph = (name = \"scoring\",\n"
      << "  actors = [(name = \"data\", kind = \"data\", params = (data = (path = \""
      << (dir / "d.jsonl").string() << "\", shuffle = false, epochs = 0))),\n"
      << "    (name = \"sampler\", kind = \"test_sampler\"),\n"
      << "    (name = \"reward\", kind = \"math_reward\", params = (mathReward = (correct = 1.0, "
         "wrong = -1.0))),\n"
      << "    (name = \"filter\", kind = \"group_filter\"),\n"
      << "    (name = \"trainer\", kind = \"test_scored_learner\")],\n"
      << "  edges = [(from = \"data.prompts\", to = \"sampler.prompts\"),\n"
      << "    (from = \"sampler.groups\", to = \"reward.groups\"),\n"
      << "    (from = \"reward.scored\", to = \"filter.groups\"),\n"
      << "    (from = \"filter.groups\", to = \"trainer.groups\")],\n"
      << "  schedule = (sync = void),\n"
      << "  run = (steps = 3, batchSize = 2, deadlineSeconds = 60));\n";
  auto loaded = graph::load_graph(dir / "g.capnp", graph::default_import_dirs());
  ASSERT_TRUE(loaded.ok()) << (loaded.errors.empty() ? "" : loaded.errors[0].text());
  auto log = std::make_shared<trained>();
  kind_registry kinds;
  data::register_data_kind(kinds);
  reward::register_reward_kinds(kinds);
  register_group_filter_kind(kinds);
  register_test_kinds(kinds, log);
  auto errors = graph::validate_kinds(*loaded.graph, kinds);
  ASSERT_TRUE(errors.empty()) << errors[0].text();
  {
    caf::actor_system_config cfg;
    cfg.add_message_types<caf::id_block::milesrt_runtime>();
    kinds.register_types(cfg);
    caf::actor_system sys{cfg};
    run_request req;
    req.run_dir = dir / "run";
    req.progress = nullptr;
    auto outcome = run_graph(sys, *loaded.graph, kinds, req);
    ASSERT_TRUE(outcome.ok) << outcome.error;
  }
  std::vector<uint64_t> ids;
  for (const auto& g : log->groups) {
    ids.push_back(g.group_id);
    ASSERT_EQ(g.samples.size(), 4u);
    EXPECT_EQ(g.samples[0].reward, 1.0f);
    EXPECT_EQ(g.samples[1].reward, -1.0f);
  }
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<uint64_t>{1, 2, 4, 5, 7, 8}));  // 3 and 6 (all right) were dropped
  fs::remove_all(dir);
}

}  // namespace
}  // namespace milesrt::buffer
