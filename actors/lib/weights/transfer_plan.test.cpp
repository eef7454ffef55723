#include "actors/lib/weights/transfer_plan.hpp"

#include <gtest/gtest.h>

#include <map>
#include <stdexcept>

namespace milesrt::weights {
namespace {

// Checks that every needed element arrives exactly once, from a trainer that owns it.
void expect_exact_cover(const std::vector<shard>& owned, const std::vector<shard>& needed,
                        const std::vector<transfer>& plan) {
  for (const auto& need : needed) {
    std::vector<int> hits(need.length, 0);
    for (const auto& t : plan) {
      if (t.dst_rank != need.rank || t.tensor != need.tensor) continue;
      ASSERT_GT(t.length, 0);
      ASSERT_GE(t.dst_offset, 0);
      ASSERT_LE(t.dst_offset + t.length, need.length);
      // The source range lies inside an owned shard of src_rank.
      bool inside = false;
      for (const auto& o : owned)
        inside |= o.rank == t.src_rank && o.tensor == t.tensor && t.src_offset >= 0 &&
                  t.src_offset + t.length <= o.length &&
                  o.offset + t.src_offset == need.offset + t.dst_offset;
      EXPECT_TRUE(inside) << t.tensor << " from " << t.src_rank << " at " << t.src_offset;
      for (int64_t i = 0; i < t.length; ++i) ++hits[t.dst_offset + i];
    }
    for (int64_t i = 0; i < need.length; ++i)
      ASSERT_EQ(hits[i], 1) << need.tensor << " element " << need.offset + i << " of engine "
                            << need.rank;
  }
}

TEST(TransferPlan, ReplicasSpreadByEngineRank) {
  // Two data-parallel trainers each hold both tensors; four engines need all of them.
  std::vector<shard> owned = {{"a", 0, 0, 100}, {"a", 1, 0, 100}, {"b", 0, 0, 10}, {"b", 1, 0, 10}};
  std::vector<shard> needed;
  for (int e = 0; e < 4; ++e) needed.push_back({"a", e, 0, 100}), needed.push_back({"b", e, 0, 10});
  auto plan = plan_p2p(owned, needed);
  expect_exact_cover(owned, needed, plan);
  ASSERT_EQ(plan.size(), 8u);  // one whole-range transfer each
  for (const auto& t : plan) EXPECT_EQ(t.src_rank, t.dst_rank % 2) << t.tensor << " " << t.dst_rank;
}

TEST(TransferPlan, SplitsWhereTensorParallelOwnershipSplits) {
  // Trainers hold a tensor in 3 tensor-parallel rows-shards of 40, 30 and 30 elements; an
  // engine with tensor parallelism 2 needs halves of 50.
  std::vector<shard> owned = {{"w", 0, 0, 40}, {"w", 1, 40, 30}, {"w", 2, 70, 30}};
  std::vector<shard> needed = {{"w", 0, 0, 50}, {"w", 1, 50, 50}};
  auto plan = plan_p2p(owned, needed);
  expect_exact_cover(owned, needed, plan);
  ASSERT_EQ(plan.size(), 4u);
  EXPECT_EQ(plan[0].src_rank, 0);
  EXPECT_EQ(plan[0].length, 40);
  EXPECT_EQ(plan[1].src_rank, 1);
  EXPECT_EQ(plan[1].src_offset, 0);
  EXPECT_EQ(plan[1].dst_offset, 40);
  EXPECT_EQ(plan[1].length, 10);
  EXPECT_EQ(plan[2].src_rank, 1);
  EXPECT_EQ(plan[2].src_offset, 10);
  EXPECT_EQ(plan[2].dst_offset, 0);
  EXPECT_EQ(plan[2].length, 20);
  EXPECT_EQ(plan[3].src_rank, 2);
  EXPECT_EQ(plan[3].dst_offset, 20);
  EXPECT_EQ(plan[3].length, 30);
}

TEST(TransferPlan, OverlappingOwnersCoverEachElementOnce) {
  // Ranges that overlap in odd ways, plus a replica: still exactly one source per element.
  std::vector<shard> owned = {{"t", 0, 0, 60}, {"t", 1, 30, 70}, {"t", 2, 10, 15}, {"t", 3, 95, 5}};
  std::vector<shard> needed;
  for (int e = 0; e < 5; ++e) needed.push_back({"t", e, 7 * e, 100 - 7 * e});
  auto plan = plan_p2p(owned, needed);
  expect_exact_cover(owned, needed, plan);
}

TEST(TransferPlan, MissingRangeNamesTensorAndRange) {
  std::vector<shard> owned = {{"w", 0, 0, 40}, {"w", 1, 50, 50}};
  try {
    plan_p2p(owned, {{"w", 3, 0, 100}});
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'w' elements [40, 50)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("engine rank 3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(plan_p2p(owned, {{"nope", 0, 0, 1}}), std::invalid_argument);
  EXPECT_THROW(plan_p2p(owned, {{"w", 0, 0, 0}}), std::invalid_argument);
}

TEST(TransferPlan, BucketsKeepOrderAndNeverSplitATensor) {
  std::vector<std::pair<std::string, int64_t>> ts = {{"a", 40}, {"b", 60}, {"c", 1},  {"big", 250},
                                                     {"d", 30}, {"e", 70}, {"f", 100}};
  auto b = make_buckets(ts, 100);
  ASSERT_EQ(b.size(), 5u);
  auto names = [](const bucket& x) {
    std::string s;
    for (const auto& [n, bytes] : x.tensors) s += n + ",";
    return s;
  };
  EXPECT_EQ(names(b[0]), "a,b,");  // exactly full
  EXPECT_EQ(b[0].bytes, 100);
  EXPECT_EQ(names(b[1]), "c,");
  EXPECT_EQ(names(b[2]), "big,");  // bigger than a bucket: alone
  EXPECT_EQ(b[2].bytes, 250);
  EXPECT_EQ(names(b[3]), "d,e,");
  EXPECT_EQ(names(b[4]), "f,");
  EXPECT_TRUE(make_buckets({}, 100).empty());
  EXPECT_THROW(make_buckets(ts, 0), std::invalid_argument);
}

}  // namespace
}  // namespace milesrt::weights

namespace milesrt::weights {
namespace {

// One trainer rank owning whole tensors, three engines needing them whole: one transfer per
// tensor and engine, from rank 0, offsets 0.
TEST(TransferPlan, WholeModelSendsEveryTensorToEveryEngine) {
  auto plan = plan_whole_model({{"a", 10}, {"b", 3}}, 3);
  ASSERT_EQ(plan.size(), 6u);
  std::map<std::pair<std::string, int>, int64_t> got;
  for (const auto& t : plan) {
    EXPECT_EQ(t.src_rank, 0);
    EXPECT_EQ(t.src_offset, 0);
    EXPECT_EQ(t.dst_offset, 0);
    got[{t.tensor, t.dst_rank}] += t.length;
  }
  for (int e = 1; e <= 3; ++e) {
    EXPECT_EQ((got[{"a", e}]), 10);
    EXPECT_EQ((got[{"b", e}]), 3);
  }
  EXPECT_TRUE(plan_whole_model({{"a", 10}}, 0).empty());
}

}  // namespace
}  // namespace milesrt::weights
