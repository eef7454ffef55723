#include "runtime/driver/driver_counters.hpp"

#include <gtest/gtest.h>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

namespace milesrt::runtime {
namespace {

driver_counters numbered() {
  driver_counters c;
  c.admitted = 1;
  c.accepted = 2;
  c.dropped_stale = 3;
  c.filtered = 4;
  c.surplus = 5;
  c.stale_violations = 6;
  c.restarts = 7;
  c.requeued = 8;
  c.in_flight = 9;
  c.buffered = 10;
  c.items_rejected = 11;
  return c;
}

TEST(DriverCounters, NamesAreTheWordsOfTheMetrics) {
  auto named = numbered().named();
  std::vector<std::string> names;
  for (size_t i = 0; i < named.size(); ++i) {
    names.emplace_back(named[i].first);
    EXPECT_EQ(named[i].second, i + 1) << named[i].first;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"admitted", "accepted", "dropped_stale", "filtered",
                                             "surplus", "stale_violations", "restarts", "requeued",
                                             "in_flight", "buffered", "items_rejected"}));
  driver_counters c;
  for (const auto& [name, value] : named) EXPECT_TRUE(c.set(name, value));
  EXPECT_EQ(c, numbered());
  EXPECT_FALSE(c.set("admited", 1));
}

TEST(DriverCounters, RoundTripAndReadTheOldMapForm) {
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  auto c = numbered();
  ASSERT_FALSE(sink(c));
  driver_counters back;
  caf::binary_deserializer source{nullptr, buf};
  ASSERT_FALSE(source(back));
  EXPECT_EQ(back, numbered());

  // A checkpoint written when the counters were a map of the seven kept ones.
  std::map<std::string, uint64_t> old{{"admitted", 10}, {"accepted", 8}, {"dropped_stale", 1},
                                      {"filtered", 1},  {"surplus", 0},  {"stale_violations", 0},
                                      {"restarts", 2}};
  std::vector<char> old_buf;
  caf::binary_serializer old_sink{nullptr, old_buf};
  ASSERT_FALSE(old_sink(old));
  driver_counters read = numbered();
  caf::binary_deserializer old_source{nullptr, old_buf};
  ASSERT_FALSE(old_source(read));
  driver_counters want;
  want.admitted = 10;
  want.accepted = 8;
  want.dropped_stale = 1;
  want.filtered = 1;
  want.restarts = 2;
  EXPECT_EQ(read, want);
}

}  // namespace
}  // namespace milesrt::runtime
