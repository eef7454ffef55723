#pragma once
/// TFRecord framing (the container of TensorBoard's event files): per record a little-endian
/// uint64 length, the masked CRC32C of those 8 bytes, the data, and the masked CRC32C of the data.

#include <cstdint>
#include <string>
#include <string_view>

namespace milesrt::runtime {

/// CRC32C (Castagnoli, reflected polynomial 0x82F63B78) of `data`.
uint32_t crc32c(std::string_view data);

/// The CRC as TFRecord stores it: rotated right by 15 bits plus 0xa282ead8.
uint32_t masked_crc32c(std::string_view data);

/// One framed record.
std::string tfrecord(std::string_view data);

}  // namespace milesrt::runtime
