// The trajectory_buffer kind as a real actor: each built-in policy's choice of batch, staleness
// dropped or kept waiting (and counted), the largest reward spread first, checkpoints that hold
// the groups and counters, a policy a plugin adds, and the errors of a bad policy.
#include "actors/buffer/trajectory_buffer_kind.hpp"

#include <gtest/gtest.h>

#include "actors/lib/llm/messages.hpp"
#include "milesrt/buffer.capnp.h"
#include "runtime/testing/kind_testing.hpp"

namespace milesrt::buffer {
namespace {
using namespace milesrt::runtime;
using namespace milesrt::kind_testing;
using llm::sample_group;

sample_group group_with(uint64_t id, std::vector<float> rewards) {
  sample_group g{id, "4", {}};
  for (float r : rewards) {
    llm::sample_msg s;
    s.output = {1, 2};
    s.reward = r;
    g.samples.push_back(s);
  }
  return g;
}

/// The group ids of a batch, in the order served.
std::vector<uint64_t> ids(const buffer_reply& r) {
  std::vector<uint64_t> out;
  for (const auto& e : r.items) out.push_back(e.payload.get_as<sample_group>(0).group_id);
  return out;
}

class TrajectoryBufferKind : public ::testing::Test {
 protected:
  TrajectoryBufferKind() : policies_(std::make_shared<policy_registry>(builtin_policies())) {
    register_trajectory_buffer_kind(kinds_, policies_);
    system_ = std::make_unique<test_system>(kinds_);
  }
  caf::actor spawn(const std::string& policy, uint32_t max_staleness = 1, bool drop = true) {
    params_of<schema::TrajectoryBufferParams> p;
    p->setPolicy(policy);
    p->setMaxStaleness(max_staleness);
    p->setOnStale(drop ? schema::TrajectoryBufferParams::OnStale::DROP
                       : schema::TrajectoryBufferParams::OnStale::WAIT);
    return kinds_.find("trajectory_buffer")->spawn(system_->sys(), p.setup());
  }
  std::vector<std::string> check(const std::string& policy) {
    params_of<schema::TrajectoryBufferParams> p;
    p->setPolicy(policy);
    std::vector<std::string> out;
    for (const auto& problem :
         kinds_.find("trajectory_buffer")->check_params(capnp::toDynamic(p->asReader())))
      out.push_back(problem.text());
    return out;
  }
  /// Puts group `id` made with model version `version` while the learner holds `learner`.
  buffer_reply put(const caf::actor& a, uint64_t id, std::vector<float> rewards, uint64_t version,
                   uint64_t learner) {
    auto r = ask<buffer_reply>(system_->sys(), a, put_atom::value, std::string("groups"),
                               wrap(group_with(id, rewards), id, version, version), learner);
    EXPECT_TRUE(r) << system_->sys().render(r.error());
    return r ? *r : buffer_reply{};
  }
  buffer_reply take(const caf::actor& a, uint64_t count, uint64_t learner,
                    bool discard_rest = false, uint64_t drop_past = UINT64_MAX) {
    auto r = ask<buffer_reply>(system_->sys(), a, take_atom::value, count, learner, discard_rest,
                               drop_past);
    EXPECT_TRUE(r) << system_->sys().render(r.error());
    return r ? *r : buffer_reply{};
  }
  std::shared_ptr<policy_registry> policies_;
  kind_registry kinds_;
  std::unique_ptr<test_system> system_;
};

TEST_F(TrajectoryBufferKind, FifoServesInArrivalOrder) {
  auto a = spawn("fifo");
  for (uint64_t id : {5, 3, 9}) EXPECT_EQ(put(a, id, {0, 1}, 0, 0).kept, 1u);
  auto none = take(a, 4, 0);
  EXPECT_TRUE(none.items.empty());  // three held, four asked: nothing served, nothing lost
  EXPECT_EQ(none.size, 3u);
  auto two = take(a, 2, 0);
  EXPECT_EQ(ids(two), (std::vector<uint64_t>{5, 3}));
  EXPECT_EQ(two.size, 1u);
  EXPECT_EQ(two.metrics.at("buffer_size"), 1.0);
  EXPECT_TRUE(put(a, 6, {0, 1}, 0, 0).metrics.empty());  // a put reports nothing per step
  // discard_rest (the sync schedule's surplus): what is left after the batch goes.
  put(a, 7, {1, 0}, 0, 0);
  auto last = take(a, 2, 0, true);
  EXPECT_EQ(ids(last), (std::vector<uint64_t>{9, 6}));
  EXPECT_EQ(last.surplus, 1u);
  EXPECT_EQ(last.size, 0u);
  // The schedule's bound (async, onStale = drop) applies before any policy: at learner version 4,
  // groups made with version 2 lag by 2 > 1 and go, as they would from the driver's queue.
  put(a, 10, {0, 1}, 2, 3);
  put(a, 11, {0, 1}, 3, 3);
  put(a, 12, {0, 1}, 2, 3);
  auto bounded = take(a, 1, 4, false, 1);
  EXPECT_EQ(bounded.dropped_stale, 2u);
  EXPECT_EQ(ids(bounded), (std::vector<uint64_t>{11}));
  EXPECT_EQ(bounded.metrics.at("buffer_dropped_stale"), 2.0);
}

TEST_F(TrajectoryBufferKind, StalenessDropsWhatIsPastTheBoundAndCountsIt) {
  auto a = spawn("staleness", 1, true);
  // Arriving 2 versions behind the learner: discarded at once.
  auto late = put(a, 1, {0, 1}, 3, 5);
  EXPECT_EQ(late.kept, 0u);
  EXPECT_EQ(late.dropped_stale, 1u);
  put(a, 2, {0, 1}, 5, 5);
  put(a, 3, {0, 1}, 4, 5);
  put(a, 4, {0, 1}, 5, 5);
  // At learner version 6, group 3 (version 4) lags by 2: dropped while it waited. Among the fresh
  // ones the oldest version goes first, then arrival.
  auto b = take(a, 2, 6);
  EXPECT_EQ(b.dropped_stale, 1u);
  EXPECT_EQ(ids(b), (std::vector<uint64_t>{2, 4}));
  EXPECT_EQ(b.metrics.at("buffer_dropped_stale"), 2.0);
  EXPECT_EQ(b.metrics.at("buffer_served_staleness_mean"), 1.0);
  EXPECT_EQ(b.stale_served, 0u);
}

TEST_F(TrajectoryBufferKind, StalenessWaitKeepsStaleGroupsBehindFreshOnes) {
  auto a = spawn("staleness", 1, false);
  put(a, 1, {0, 1}, 2, 5);  // kept: 3 versions behind
  put(a, 2, {0, 1}, 5, 5);
  put(a, 3, {0, 1}, 4, 5);
  auto b = take(a, 2, 5);
  EXPECT_EQ(b.dropped_stale, 0u);
  EXPECT_EQ(ids(b), (std::vector<uint64_t>{3, 2}));  // fresh ones, the older version first
  EXPECT_EQ(b.stale_served, 0u);
  put(a, 4, {0, 1}, 5, 5);
  // Two asked, one fresh: the stale one fills the batch, counted.
  auto c = take(a, 2, 5);
  EXPECT_EQ(ids(c), (std::vector<uint64_t>{4, 1}));
  EXPECT_EQ(c.stale_served, 1u);
  EXPECT_EQ(c.metrics.at("buffer_stale_served"), 1.0);
}

TEST_F(TrajectoryBufferKind, PriorityServesTheLargestRewardSpreadFirst) {
  auto a = spawn("priority");
  put(a, 1, {1, 1, 1, 1}, 0, 0);  // spread 0
  put(a, 2, {1, 0, 0, 0}, 0, 0);  // spread sqrt(3)/4 = 0.433
  put(a, 3, {1, 1, 0, 0}, 0, 0);  // spread 0.5
  put(a, 4, {0, 0, 0, 1}, 0, 0);  // 0.433, after group 2
  put(a, 5, {0, 1, 1, 1}, 0, 0);  // 0.433
  auto b = take(a, 3, 0);
  EXPECT_EQ(ids(b), (std::vector<uint64_t>{3, 2, 4}));
  EXPECT_NEAR(b.metrics.at("buffer_served_spread_mean"), (0.5 + 2 * std::sqrt(3.0) / 4) / 3, 1e-9);
  auto c = take(a, 2, 0);
  EXPECT_EQ(ids(c), (std::vector<uint64_t>{5, 1}));
}

TEST_F(TrajectoryBufferKind, ASnapshotHoldsTheGroupsAndCounters) {
  auto a = spawn("priority");
  put(a, 1, {1, 1}, 0, 0);
  put(a, 2, {1, 0}, 0, 0);
  put(a, 3, {0, 1}, 0, 0);
  take(a, 5, 0);  // too few: nothing served, and the counters move on
  auto state =
      ask<actor_state>(system_->sys(), a, snapshot_atom::value, std::string("/nonexistent"));
  ASSERT_TRUE(state);
  auto b = spawn("priority");
  auto ok = ask<bool>(system_->sys(), b, restore_atom::value, std::string("/nonexistent"), *state);
  ASSERT_TRUE(ok && *ok);
  // The restored buffer serves what the first one would have, in the same order.
  auto from_a = take(a, 2, 0), from_b = take(b, 2, 0);
  EXPECT_EQ(ids(from_b), ids(from_a));
  EXPECT_EQ(from_b.metrics, from_a.metrics);
  put(a, 4, {0, 1}, 0, 0);
  put(b, 4, {0, 1}, 0, 0);
  EXPECT_EQ(ids(take(b, 2, 0)), ids(take(a, 2, 0)));
  // A corrupt state is refused.
  actor_state bad{{1, 2, 3}};
  auto refused = ask<bool>(system_->sys(), spawn("fifo"), restore_atom::value,
                           std::string("/nonexistent"), bad);
  ASSERT_TRUE(refused);
  EXPECT_FALSE(*refused);
}

/// A plugin's policy: the newest arrival first (a stack), and one that serves a group twice.
class newest_first final : public buffer_policy {
 public:
  choice choose(const std::deque<held_group>& held, uint64_t count, uint64_t,
                const policy_rules&) const override {
    choice c;
    for (size_t i = held.size(); i-- > 0 && c.serve.size() < count;) c.serve.push_back(i);
    return c;
  }
};
class twice final : public buffer_policy {
 public:
  choice choose(const std::deque<held_group>&, uint64_t count, uint64_t,
                const policy_rules&) const override {
    return {std::vector<size_t>(count, 0), {}, 0};
  }
};

TEST_F(TrajectoryBufferKind, APolicyAddedByNameIsUsedAndABadOneRefused) {
  EXPECT_EQ(check("lifo"),
            (std::vector<std::string>{"policy: 'lifo' is not one of: fifo, priority, staleness"}));
  policies_->add("lifo", [] { return std::make_unique<newest_first>(); });
  policies_->add("twice", [] { return std::make_unique<twice>(); });
  EXPECT_TRUE(check("lifo").empty());
  auto a = spawn("lifo");
  for (uint64_t id : {1, 2, 3}) put(a, id, {0, 1}, 0, 0);
  EXPECT_EQ(ids(take(a, 2, 0)), (std::vector<uint64_t>{3, 2}));
  auto b = spawn("twice");
  for (uint64_t id : {1, 2}) put(b, id, {0, 1}, 0, 0);
  auto r = ask<buffer_reply>(system_->sys(), b, take_atom::value, uint64_t{2}, uint64_t{0}, false,
                             UINT64_MAX);
  ASSERT_FALSE(r);
  EXPECT_NE(system_->sys().render(r.error()).find(
                "its policy chose group index 0 of 2 twice or out of range"),
            std::string::npos);
}

TEST_F(TrajectoryBufferKind, RefusesWhatIsNotAScoredGroup) {
  auto a = spawn("fifo");
  auto wrong = ask<buffer_reply>(system_->sys(), a, put_atom::value, std::string("groups"),
                                 wrap(uint64_t{4}), uint64_t{0});
  ASSERT_FALSE(wrong);
  EXPECT_NE(system_->sys().render(wrong.error()).find("port 'groups' expects a sample_group"),
            std::string::npos);
  auto port = ask<buffer_reply>(system_->sys(), a, put_atom::value, std::string("nope"),
                                wrap(group_with(1, {0, 1})), uint64_t{0});
  ASSERT_FALSE(port);
  EXPECT_NE(system_->sys().render(port.error()).find("no input port 'nope'"), std::string::npos);
}

}  // namespace
}  // namespace milesrt::buffer
