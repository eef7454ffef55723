#pragma once
// bf16 <-> float on the host and the device, round to nearest even (as ATen's c10::BFloat16).
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define MILESRT_BF16_HD __host__ __device__ __forceinline__
#else
#define MILESRT_BF16_HD inline
#endif

namespace milesrt::kernels {

MILESRT_BF16_HD float bf16_bits_to_float(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

MILESRT_BF16_HD uint16_t float_to_bf16_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

/// The value f takes once rounded to bf16.
MILESRT_BF16_HD float round_bf16(float f) { return bf16_bits_to_float(float_to_bf16_bits(f)); }

}  // namespace milesrt::kernels
