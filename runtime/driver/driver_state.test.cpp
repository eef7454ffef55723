// The driver's durable state is what a checkpoint's driver.bin holds: checkpoints written before it
// replaced the snapshot struct (whose queues were std::vector) must read unchanged, and the state
// must round-trip.
#include "runtime/driver/driver_state.hpp"

#include <gtest/gtest.h>

#include <caf/all.hpp>

namespace milesrt::runtime::driver_impl {
namespace {

/// The snapshot layout of earlier versions, as they wrote driver.bin.
struct earlier_snapshot {
  uint64_t step = 0, version = 0, next_origin = 1;
  driver_counters counters;
  bool exhausted = false;
  std::vector<envelope> buffer;
  std::vector<output> last_publication;
  std::vector<double> source_credit;
  std::vector<uint8_t> source_out;
  uint64_t buffer_held = 0, buffer_dropped = 0;
  std::vector<std::vector<envelope>> aux_queue;
  std::vector<uint64_t> aux_version;
  bool buffer_actor = false;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, earlier_snapshot& x) {
  return f(caf::meta::type_name("driver_snapshot"), x.step, x.version, x.next_origin, x.counters,
           x.exhausted, x.buffer, x.last_publication, x.source_credit, x.source_out, x.buffer_held,
           x.buffer_dropped, x.aux_queue, x.aux_version, x.buffer_actor);
}

envelope item(uint64_t origin, uint64_t version) {
  envelope e;
  e.origin = origin;
  e.source = uint32_t(origin % 2);
  e.min_version = version;
  e.max_version = version + 1;
  return e;
}

template <class T>
std::vector<char> bytes_of(caf::actor_system& sys, T& x) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  EXPECT_FALSE(sink(x));
  return buf;
}

TEST(DriverState, ReadsTheDriverBinOfEarlierVersions) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  earlier_snapshot old;
  old.step = 7;
  old.version = 9;
  old.next_origin = 41;
  old.counters.admitted = 40;
  old.counters.accepted = 30;
  old.counters.dropped_stale = 3;
  old.exhausted = true;
  old.buffer = {item(31, 8), item(33, 9)};
  old.last_publication = {{"weights", item(0, 9)}};
  old.source_credit = {0.25, -0.25};
  old.source_out = {0, 1};
  old.buffer_held = 5;
  old.buffer_dropped = 2;
  old.aux_queue = {{item(35, 9)}, {}};
  old.aux_version = {6, 0};
  old.buffer_actor = true;
  std::vector<char> buf = bytes_of(sys, old);

  durable_state now;
  caf::binary_deserializer source{sys, buf};
  ASSERT_FALSE(source(now));
  EXPECT_EQ(now.step, 7u);
  EXPECT_EQ(now.version, 9u);
  EXPECT_EQ(now.sources.next_origin, 41u);
  EXPECT_EQ(now.counters.admitted, 40u);
  EXPECT_EQ(now.counters.accepted, 30u);
  EXPECT_EQ(now.counters.dropped_stale, 3u);
  EXPECT_TRUE(now.sources.exhausted);
  ASSERT_EQ(now.feed.queue.size(), 2u);
  EXPECT_EQ(now.feed.queue[1].origin, 33u);
  EXPECT_EQ(now.feed.queue[1].max_version, 10u);
  ASSERT_EQ(now.last_publication.size(), 1u);
  EXPECT_EQ(now.last_publication[0].port, "weights");
  EXPECT_EQ(now.sources.credit, (std::vector<double>{0.25, -0.25}));
  EXPECT_EQ(now.sources.out, (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(now.feed.buffer_held, 5u);
  EXPECT_EQ(now.feed.buffer_dropped, 2u);
  ASSERT_EQ(now.feed.aux_queue.size(), 2u);
  ASSERT_EQ(now.feed.aux_queue[0].size(), 1u);
  EXPECT_EQ(now.feed.aux_queue[0][0].origin, 35u);
  EXPECT_TRUE(now.feed.aux_queue[1].empty());
  EXPECT_EQ(now.feed.aux_version, (std::vector<uint64_t>{6, 0}));
  EXPECT_TRUE(now.feed.buffer_actor);

  // And what it writes is what they wrote, byte for byte.
  EXPECT_EQ(bytes_of(sys, now), buf);
}

}  // namespace
}  // namespace milesrt::runtime::driver_impl
