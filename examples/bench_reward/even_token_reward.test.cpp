// The plugin as milesrt loads it: dlopen the built library, run its init, spawn the kind, score
// a group.
#include "examples/bench_reward/even_token_reward.hpp"

#include <gtest/gtest.h>

#include "actors/lib/llm/messages.hpp"
#include "runtime/core/plugins.hpp"
#include "runtime/testing/kind_testing.hpp"

namespace milesrt::examples {
namespace {
using namespace milesrt::runtime;
using namespace milesrt::kind_testing;
using llm::sample_group;

TEST(EvenTokenReward, ScoresTheShareOfEvenIds) {
  EXPECT_DOUBLE_EQ(even_token_share({2, 4, 6}), 1);
  EXPECT_DOUBLE_EQ(even_token_share({1, 2, 3, 0}), 0.5);
  EXPECT_DOUBLE_EQ(even_token_share({151935}), 0);
  EXPECT_DOUBLE_EQ(even_token_share({}), 0);
}

TEST(EvenTokenReward, RunsFromThePlugin) {
  kind_registry kinds;
  caf::actor_system_config unused;
  ASSERT_EQ(load_plugin_file(MILESRT_BENCH_REWARD_PLUGIN, {&kinds, &unused}), "");
  const auto* kind = kinds.find("even_token_reward");
  ASSERT_NE(kind, nullptr);
  EXPECT_EQ(kind->outputs[0].type, "llm.scored_group");
  test_system system(kinds);
  actor_setup s;
  s.store = std::make_shared<process_store>();
  auto a = kind->spawn(system.sys(), s);
  sample_group g{1, "", {}};
  for (auto ids : {std::vector<int64_t>{2, 4}, {1, 2, 3, 4}, {5, 7, 9}}) {
    llm::sample_msg m;
    m.output = ids;
    g.samples.push_back(m);
  }
  auto reply =
      ask<node_reply>(system.sys(), a, process_atom::value, std::string("groups"), wrap(g, 3));
  ASSERT_TRUE(reply) << system.sys().render(reply.error());
  ASSERT_EQ(reply->outputs.size(), 1u);
  EXPECT_EQ(reply->outputs[0].port, "scored");
  EXPECT_EQ(reply->outputs[0].item.origin, 3u);
  auto scored = reply->outputs[0].item.payload.get_as<sample_group>(0);
  EXPECT_FLOAT_EQ(scored.samples[0].reward, 1.0f);
  EXPECT_FLOAT_EQ(scored.samples[1].reward, 0.5f);
  EXPECT_FLOAT_EQ(scored.samples[2].reward, 0.0f);
  EXPECT_DOUBLE_EQ(reply->metrics.at("reward_mean"), 0.5);
}

}  // namespace
}  // namespace milesrt::examples
