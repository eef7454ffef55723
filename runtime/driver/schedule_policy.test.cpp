// The schedule policies' rules, decided directly (no actors): admission counts, what is kept or
// dropped on arrival and when a batch is taken, when a batch is ready, and the surplus.
#include "runtime/driver/schedule_policy.hpp"

#include <gtest/gtest.h>

#include "runtime/driver/bounded_staleness_policy.hpp"
#include "runtime/driver/staleness.hpp"
#include "runtime/driver/sync_policy.hpp"

namespace milesrt::runtime {
namespace {

schedule_view idle(uint64_t batch, uint64_t version) {
  schedule_view v;
  v.batch_size = batch;
  v.version = version;
  v.published = version;
  v.quiescent = true;
  return v;
}

TEST(Staleness, VersionsPastTheItemsOldest) {
  EXPECT_EQ(staleness(5, 3), 2u);
  EXPECT_EQ(staleness(3, 3), 0u);
  EXPECT_EQ(staleness(3, 5), 0u);  // made with a version the learner has not reached
  EXPECT_EQ(staleness(0, 0), 0u);
}

TEST(SyncPolicy, AdmitsOneBatchPerStepWhenEverythingIsDone) {
  sync_policy p;
  auto v = idle(4, 2);
  EXPECT_EQ(p.admissible(v), 4u);
  v.buffered = 3;  // a filter left the batch short: over-sample the rest
  EXPECT_EQ(p.admissible(v), 1u);
  v.buffered = 4;
  EXPECT_EQ(p.admissible(v), 0u);
  v.buffered = 6;
  EXPECT_EQ(p.admissible(v), 0u);
  v = idle(4, 2);
  v.quiescent = false;  // the previous step's work is still under way
  EXPECT_EQ(p.admissible(v), 0u);
  v = idle(4, 2);
  v.published = 1;  // the new version has not reached every stage yet
  EXPECT_EQ(p.admissible(v), 0u);
  // What was accepted before does not matter in lockstep.
  v = idle(4, 2);
  v.accepted = 100;
  EXPECT_EQ(p.admissible(v), 4u);
}

TEST(SyncPolicy, KeepsEveryItemAndTrainsOnlyWhenGenerationIsDone) {
  sync_policy p;
  EXPECT_EQ(p.on_arrival(7, 0), arrival_verdict::accept);
  EXPECT_EQ(p.on_take(7, 0), take_verdict::keep);
  auto v = idle(4, 2);
  v.buffered = 4;
  EXPECT_TRUE(p.batch_ready(v));
  v.buffered = 3;
  EXPECT_FALSE(p.batch_ready(v));
  v.buffered = 5;
  v.in_flight = 1;
  EXPECT_FALSE(p.batch_ready(v));
  v.in_flight = 0;
  v.producing = 2;
  EXPECT_FALSE(p.batch_ready(v));
  EXPECT_TRUE(p.discards_surplus());
}

TEST(BoundedStalenessPolicy, WaitAdmitsWhileTheArealLimitExceedsWhatIsUsed) {
  // limit = (max_staleness + published + 1) * batch; used = accepted + dropped + in flight +
  // producing
  bounded_staleness_policy p(1, false);
  auto v = idle(4, 0);
  v.quiescent = false;             // does not matter here
  EXPECT_EQ(p.admissible(v), 4u);  // limit 8, used 0: one batch at a time
  v.accepted = 3;
  v.in_flight = 2;
  EXPECT_EQ(p.admissible(v), 3u);  // used 5
  v.dropped_stale = 1;
  v.producing = 1;
  EXPECT_EQ(p.admissible(v), 1u);  // used 7
  v.producing = 2;
  EXPECT_EQ(p.admissible(v), 0u);  // used 8
  v.buffered = 100;                // what waits in the buffer is already in `accepted`
  EXPECT_EQ(p.admissible(v), 0u);
  v.version = 5;  // the learner's version alone does not open the limit...
  EXPECT_EQ(p.admissible(v), 0u);
  v.published = 1;  // ...the version the stages received does: limit 12
  EXPECT_EQ(p.admissible(v), 4u);
  v.published = 2;  // limit 16, used 8: still one batch at a time
  EXPECT_EQ(p.admissible(v), 4u);
  bounded_staleness_policy strict(0, false);
  auto w = idle(3, 2);  // limit (0 + 2 + 1) * 3 = 9
  w.accepted = 7;
  EXPECT_EQ(strict.admissible(w), 2u);
}

TEST(BoundedStalenessPolicy, DropKeepsAWindowOfOpenWork) {
  // window = (max_staleness + 1) * batch; open = in flight + producing + buffered
  bounded_staleness_policy p(2, true);
  auto v = idle(4, 0);
  EXPECT_EQ(p.admissible(v), 4u);  // window 12, open 0
  v.in_flight = 5;
  v.producing = 1;
  v.buffered = 3;
  EXPECT_EQ(p.admissible(v), 3u);  // open 9
  v.buffered = 6;
  EXPECT_EQ(p.admissible(v), 0u);  // open 12
  v = idle(4, 0);
  v.accepted = 1000;  // what was accepted or dropped before does not count
  v.dropped_stale = 1000;
  EXPECT_EQ(p.admissible(v), 4u);
}

TEST(BoundedStalenessPolicy, DropDiscardsTooStaleItemsOnArrivalAndOnTake) {
  bounded_staleness_policy p(1, true);
  EXPECT_EQ(p.on_arrival(3, 3), arrival_verdict::accept);
  EXPECT_EQ(p.on_arrival(3, 2), arrival_verdict::accept);      // staleness 1 = the bound
  EXPECT_EQ(p.on_arrival(3, 1), arrival_verdict::drop_stale);  // staleness 2
  EXPECT_EQ(p.on_arrival(3, 9), arrival_verdict::accept);
  EXPECT_EQ(p.on_take(3, 2), take_verdict::keep);
  EXPECT_EQ(p.on_take(3, 1), take_verdict::drop_stale);
  EXPECT_FALSE(p.discards_surplus());
}

TEST(BoundedStalenessPolicy, WaitKeepsEveryArrivalAndCountsViolationsOnTake) {
  bounded_staleness_policy p(1, false);
  EXPECT_EQ(p.on_arrival(9, 0), arrival_verdict::accept);
  EXPECT_EQ(p.on_take(3, 2), take_verdict::keep);
  EXPECT_EQ(p.on_take(3, 1), take_verdict::keep_stale);
  bounded_staleness_policy none(0, false);
  EXPECT_EQ(none.on_take(3, 3), take_verdict::keep);
  EXPECT_EQ(none.on_take(3, 2), take_verdict::keep_stale);
  EXPECT_FALSE(p.discards_surplus());
}

TEST(BoundedStalenessPolicy, TrainsOnAFullBufferWhileGenerationGoesOn) {
  bounded_staleness_policy p(1, false);
  auto v = idle(4, 1);
  v.in_flight = 3;
  v.producing = 4;
  v.buffered = 3;
  EXPECT_FALSE(p.batch_ready(v));
  v.buffered = 4;
  EXPECT_TRUE(p.batch_ready(v));
}

TEST(SchedulePolicy, TheFactoryPicksThePlansSchedule) {
  schedule_plan sync;
  EXPECT_NE(dynamic_cast<sync_policy*>(make_schedule_policy(sync).get()), nullptr);
  schedule_plan async;
  async.async = true;
  async.max_staleness = 3;
  async.drop_stale = true;
  auto p = make_schedule_policy(async);
  auto* b = dynamic_cast<bounded_staleness_policy*>(p.get());
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->max_staleness(), 3u);
  EXPECT_TRUE(b->drop_stale());
}

}  // namespace
}  // namespace milesrt::runtime
