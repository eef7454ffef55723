#pragma once
/// Counter-based random numbers for sampling: Philox4x32-10 (Salmon et al., "Parallel random
/// numbers: as easy as 1, 2, 3", SC'11), the generator cuRAND and PyTorch use. The same code runs
/// on the host (the CPU reference) and on the device, so both draw the same numbers.
/// A number depends only on its key (the request's seed) and its counter (token position,
/// vocabulary id), never on where the request sits in a batch.

#include <cstdint>

#if defined(__CUDACC__)
#define MILESRT_HD __host__ __device__ __forceinline__
#else
#define MILESRT_HD inline
#endif

namespace milesrt::kernels {

MILESRT_HD void philox_round(uint32_t c[4], const uint32_t k[2]) {
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;
  const uint64_t p0 = uint64_t(M0) * c[0];
  const uint64_t p1 = uint64_t(M1) * c[2];
  const uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
  const uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
  const uint32_t n0 = hi1 ^ c[1] ^ k[0];
  const uint32_t n2 = hi0 ^ c[3] ^ k[1];
  c[0] = n0;
  c[1] = lo1;
  c[2] = n2;
  c[3] = lo0;
}

/// Philox4x32-10 of counter (c0..c3) under key (k0, k1).
MILESRT_HD void philox4x32_10(uint32_t c[4], uint32_t k0, uint32_t k1) {
  constexpr uint32_t W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  uint32_t k[2] = {k0, k1};
  for (int r = 0; r < 10; ++r) {
    philox_round(c, k);
    k[0] += W0;
    k[1] += W1;
  }
}

/// A uniform double in (0, 1) with 53 random bits, for (seed, position, vocabulary id).
MILESRT_HD double philox_uniform(uint64_t seed, int64_t position, int64_t vocab_id) {
  uint32_t c[4] = {uint32_t(uint64_t(position)), uint32_t(uint64_t(position) >> 32),
                   uint32_t(uint64_t(vocab_id)), uint32_t(uint64_t(vocab_id) >> 32)};
  philox4x32_10(c, uint32_t(seed), uint32_t(seed >> 32));
  const uint64_t bits = ((uint64_t(c[0]) << 32) | c[1]) >> 11;  // 53 bits
  return (double(bits) + 0.5) * (1.0 / 9007199254740992.0);     // 2^-53
}

}  // namespace milesrt::kernels
