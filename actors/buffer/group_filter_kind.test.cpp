// The group_filter kind as a real actor: groups with equal rewards dropped under dynamic
// sampling, passed on otherwise.
#include "actors/buffer/group_filter_kind.hpp"

#include <gtest/gtest.h>

#include "actors/lib/llm/messages.hpp"
#include "milesrt/reward.capnp.h"
#include "runtime/testing/kind_testing.hpp"

namespace milesrt::buffer {
namespace {
using namespace milesrt::runtime;
using namespace milesrt::kind_testing;
using llm::sample_group;

sample_group group_with(std::vector<float> rewards) {
  sample_group g{11, "4", {}};
  for (float r : rewards) {
    llm::sample_msg s;
    s.output = {1, 2};
    s.reward = r;
    g.samples.push_back(s);
  }
  return g;
}

class GroupFilterKind : public ::testing::Test {
 protected:
  GroupFilterKind() {
    register_group_filter_kind(kinds_);
    system_ = std::make_unique<test_system>(kinds_);
  }
  caf::actor spawn(bool dynamic_sampling) {
    params_of<schema::GroupFilterParams> p;
    p->setDynamicSampling(dynamic_sampling);
    return kinds_.find("group_filter")->spawn(system_->sys(), p.setup());
  }
  caf::expected<node_reply> process(const caf::actor& a, const sample_group& g) {
    return ask<node_reply>(system_->sys(), a, process_atom::value, std::string("groups"),
                           wrap(g, 5, 2, 3));
  }
  kind_registry kinds_;
  std::unique_ptr<test_system> system_;
};

TEST_F(GroupFilterKind, DropsGroupsWithEqualRewards) {
  auto a = spawn(true);
  for (auto rewards :
       {std::vector<float>{1, 1, 1, 1}, std::vector<float>{0, 0}, std::vector<float>{0.5f}}) {
    auto reply = process(a, group_with(rewards));
    ASSERT_TRUE(reply) << system_->sys().render(reply.error());
    EXPECT_TRUE(reply->outputs.empty());
    EXPECT_EQ(reply->metrics.at("filtered_groups"), 1.0);
  }
}

TEST_F(GroupFilterKind, PassesGroupsWithASignal) {
  auto a = spawn(true);
  auto reply = process(a, group_with({1, 0, 1, 1}));
  ASSERT_TRUE(reply) << system_->sys().render(reply.error());
  ASSERT_EQ(reply->outputs.size(), 1u);
  EXPECT_EQ(reply->outputs[0].port, "groups");
  EXPECT_EQ(reply->outputs[0].item.origin, 5u);
  EXPECT_EQ(reply->outputs[0].item.min_version, 2u);
  EXPECT_EQ(reply->outputs[0].item.max_version, 3u);
  auto g = reply->outputs[0].item.payload.get_as<sample_group>(0);
  EXPECT_EQ(g.group_id, 11u);
  ASSERT_EQ(g.samples.size(), 4u);
  EXPECT_EQ(g.samples[1].reward, 0.0f);
  EXPECT_EQ(reply->metrics.at("filtered_groups"), 0.0);
}

TEST_F(GroupFilterKind, PassesEverythingWithoutDynamicSampling) {
  auto reply = process(spawn(false), group_with({1, 1, 1}));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->outputs.size(), 1u);
  EXPECT_EQ(reply->metrics.at("filtered_groups"), 0.0);
}

TEST_F(GroupFilterKind, RefusesOtherPayloads) {
  auto reply = ask<node_reply>(system_->sys(), spawn(true), process_atom::value,
                               std::string("groups"), wrap(std::string("not a group")));
  ASSERT_FALSE(reply);
  EXPECT_NE(system_->sys()
                .render(reply.error())
                .find("group_filter: port 'groups' expects a sample_group"),
            std::string::npos);
}

}  // namespace
}  // namespace milesrt::buffer
