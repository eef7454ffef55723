#include "runtime/metrics/tfrecord.hpp"

#include <gtest/gtest.h>

namespace milesrt::runtime {

TEST(Tfrecord, Crc32cOfTheStandardCheckStrings) {
  // RFC 3720 (iSCSI) B.4 and the usual check value of "123456789".
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62A8AB43u);
}

TEST(Tfrecord, FrameHoldsLengthDataAndBothChecksums) {
  std::string r = tfrecord("abc");
  ASSERT_EQ(r.size(), 8u + 4u + 3u + 4u);
  EXPECT_EQ(static_cast<unsigned char>(r[0]), 3u);
  for (int i = 1; i < 8; ++i) EXPECT_EQ(r[i], '\0');
  EXPECT_EQ(r.substr(12, 3), "abc");
  uint32_t data_crc = 0;
  for (int i = 0; i < 4; ++i)
    data_crc |= uint32_t(static_cast<unsigned char>(r[15 + i])) << (8 * i);
  EXPECT_EQ(data_crc, masked_crc32c("abc"));
  uint32_t c = crc32c("abc");
  EXPECT_EQ(masked_crc32c("abc"), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

}  // namespace milesrt::runtime
