// The data kind as a real actor: order, epochs, chat prompts, and the position kept across a
// snapshot and restore.
#include "actors/data/data_kind.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "actors/lib/llm/messages.hpp"
#include "actors/lib/tasks/jsonl_dataset.hpp"
#include "milesrt/data.capnp.h"
#include "runtime/testing/kind_testing.hpp"

namespace milesrt::data {
namespace {
namespace fs = std::filesystem;
using namespace milesrt::runtime;
using namespace milesrt::kind_testing;
using llm::prompt_msg;

class DataKind : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("milesrt-data-kind-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::ofstream out(dir_ / "d.jsonl");
    for (int i = 0; i < 20; ++i)
      out << R"({"prompt": "p)" << i << R"(", "label": )" << i * 10 << "}\n";
    register_data_kind(kinds_);
    system_ = std::make_unique<test_system>(kinds_);
  }
  void TearDown() override {
    system_.reset();
    fs::remove_all(dir_);
  }

  /// A data actor over d.jsonl.
  caf::actor spawn(bool shuffle, uint32_t epochs, uint64_t run_seed = 1, bool as_chat = false) {
    params_of<schema::DataParams> p;
    p->setPath((dir_ / "d.jsonl").string());
    p->setShuffle(shuffle);
    p->setEpochs(epochs);
    p->setAsChat(as_chat);
    p->setSeed(5);
    return kinds_.find("data")->spawn(system_->sys(), p.setup(run_seed));
  }

  std::vector<prompt_msg> produce(const caf::actor& a, uint64_t count) {
    auto reply = ask<node_reply>(system_->sys(), a, produce_atom::value, count);
    EXPECT_TRUE(reply) << system_->sys().render(reply.error());
    std::vector<prompt_msg> out;
    if (!reply) return out;
    for (const auto& o : reply->outputs) {
      EXPECT_EQ(o.port, "prompts");
      out.push_back(o.item.payload.get_as<prompt_msg>(0));
    }
    return out;
  }

  static std::vector<std::string> texts(const std::vector<prompt_msg>& ps) {
    std::vector<std::string> out;
    for (const auto& p : ps) out.push_back(p.text);
    return out;
  }

  fs::path dir_;
  kind_registry kinds_;
  std::unique_ptr<test_system> system_;
};

TEST_F(DataKind, ServesRecordsInOrderUntilTheEpochsAreDone) {
  auto a = spawn(false, 2);
  auto first = produce(a, 3);
  ASSERT_EQ(first.size(), 3u);
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(first[i].group_id, i + 1);
    EXPECT_EQ(first[i].text, "p" + std::to_string(i));
    EXPECT_EQ(first[i].label, std::to_string(i * 10));
    EXPECT_EQ(first[i].messages_json, "");
  }
  auto rest = produce(a, 100);  // fewer than asked: the data runs out
  ASSERT_EQ(rest.size(), 37u);
  EXPECT_EQ(rest[16].text, "p19");
  EXPECT_EQ(rest[17].text, "p0");  // the second epoch
  EXPECT_EQ(rest.back().group_id, 40u);
  EXPECT_TRUE(produce(a, 5).empty());
}

TEST_F(DataKind, RunsWithoutEndForZeroEpochs) {
  auto a = spawn(true, 0);
  EXPECT_EQ(produce(a, 50).size(), 50u);
  EXPECT_EQ(produce(a, 50).size(), 50u);
}

TEST_F(DataKind, ShufflesEachEpochWithTheSeeds) {
  auto a = spawn(true, 2);
  auto e1 = texts(produce(a, 20)), e2 = texts(produce(a, 20));
  auto sorted1 = e1, sorted2 = e2, plain = texts(produce(spawn(false, 1), 20));
  std::sort(sorted1.begin(), sorted1.end());
  std::sort(sorted2.begin(), sorted2.end());
  std::sort(plain.begin(), plain.end());
  EXPECT_EQ(sorted1, plain);  // each epoch is a permutation
  EXPECT_EQ(sorted2, plain);
  EXPECT_NE(e1, e2);
  EXPECT_NE(e1, texts(produce(spawn(false, 1), 20)));
  EXPECT_EQ(e1, texts(produce(spawn(true, 2), 20)));  // the same seeds, the same order
  EXPECT_NE(e1, texts(produce(spawn(true, 2, /*run_seed=*/2), 20)));  // the run's seed counts
}

TEST_F(DataKind, WrapsPromptsAsChatMessages) {
  auto p = produce(spawn(false, 1, 1, /*as_chat=*/true), 1);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].messages_json, R"([{"content":"p0","role":"user"}])");
  EXPECT_EQ(p[0].text, "p0");
}

TEST_F(DataKind, ServesPromptIdsAsTheyAre) {
  std::ofstream(dir_ / "d.jsonl") << R"({"prompt_ids": [5, 0, 17]})"
                                  << "\n"
                                  << R"({"prompt": "text", "prompt_ids": [3]})"
                                  << "\n";
  auto p = produce(spawn(false, 1), 5);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].ids, (std::vector<int64_t>{5, 0, 17}));
  EXPECT_EQ(p[0].text, "");
  EXPECT_EQ(p[1].ids, (std::vector<int64_t>{3}));
  for (const char* bad : {R"({"prompt_ids": []})", R"({"prompt_ids": [1, -2]})",
                          R"({"prompt_ids": [1.5]})", R"({"prompt_ids": "1 2"})"}) {
    std::ofstream(dir_ / "bad.jsonl") << bad << "\n";
    try {
      milesrt::tasks::load_jsonl(dir_ / "bad.jsonl");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("bad.jsonl:1: 'prompt_ids' "), std::string::npos)
          << e.what();
    }
  }
}

TEST_F(DataKind, ContinuesFromASnapshot) {
  auto a = spawn(true, 3);
  produce(a, 27);  // into the second epoch
  auto state = ask<actor_state>(system_->sys(), a, snapshot_atom::value, dir_.string());
  ASSERT_TRUE(state);
  auto expected = produce(a, 30);

  auto b = spawn(true, 3, /*run_seed=*/99);  // the order seed comes from the snapshot
  auto ok = ask<bool>(system_->sys(), b, restore_atom::value, dir_.string(), *state);
  ASSERT_TRUE(ok && *ok);
  auto resumed = produce(b, 30);
  ASSERT_EQ(resumed.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(resumed[i].group_id, expected[i].group_id);
    EXPECT_EQ(resumed[i].text, expected[i].text);
  }
  EXPECT_EQ(resumed.front().group_id, 28u);
}

TEST_F(DataKind, RefusesTheStateOfAnotherDataset) {
  auto a = spawn(false, 1);
  produce(a, 2);
  auto state = ask<actor_state>(system_->sys(), a, snapshot_atom::value, dir_.string());
  ASSERT_TRUE(state);
  std::ofstream(dir_ / "d.jsonl", std::ios::app) << R"({"prompt": "one more"})"
                                                 << "\n";
  auto b = spawn(false, 1);
  auto ok = ask<bool>(system_->sys(), b, restore_atom::value, dir_.string(), *state);
  ASSERT_TRUE(ok);
  EXPECT_FALSE(*ok);
  auto garbage =
      ask<bool>(system_->sys(), b, restore_atom::value, dir_.string(), actor_state{{1, 2, 3}});
  ASSERT_TRUE(garbage);
  EXPECT_FALSE(*garbage);
}

TEST_F(DataKind, ChecksItsParams) {
  const auto* kind = kinds_.find("data");
  ASSERT_NE(kind, nullptr);
  EXPECT_EQ(kind->role, role::source);
  EXPECT_EQ(kind->params_member, "data");
  params_of<schema::DataParams> none;
  auto problems = kind->check_params(capnp::toDynamic((*none).asReader()));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].text(), "path: required (a JSONL file)");
  params_of<schema::DataParams> absent;
  absent->setPath((dir_ / "absent.jsonl").string());
  problems = kind->check_params(capnp::toDynamic((*absent).asReader()));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].text(), "path: '" + (dir_ / "absent.jsonl").string() + "' is not a file");

  std::ofstream(dir_ / "bad.jsonl") << "{\"prompt\": \"a\"}\nnot json\n";
  params_of<schema::DataParams> bad;
  bad->setPath((dir_ / "bad.jsonl").string());
  try {
    kind->spawn(system_->sys(), bad.setup());
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find((dir_ / "bad.jsonl").string() + ":2: not valid JSON"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace milesrt::data
