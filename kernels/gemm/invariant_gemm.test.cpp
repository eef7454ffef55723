#include "kernels/gemm/invariant_gemm.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/decoder/bf16.hpp"

namespace milesrt::kernels {
namespace {

// The host reference against the same sums in double (exact for these small integers' products),
// with row strides wider than the rows.
TEST(InvariantGemmCpu, IsTheRowTimesTheTransposedWeights) {
  const int64_t m = 3, n = 4, k = 5, ldx = 7, ldy = 6;
  std::vector<uint16_t> x(m * ldx, 0), w(n * k), y(m * ldy, 0xffff);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t i = 0; i < k; ++i) x[r * ldx + i] = float_to_bf16_bits(float(r + 1) - 0.5f * i);
  for (int64_t c = 0; c < n; ++c)
    for (int64_t i = 0; i < k; ++i) w[c * k + i] = float_to_bf16_bits(0.25f * float(c - i));
  invariant_gemm_bf16_cpu(x.data(), ldx, w.data(), y.data(), ldy, m, n, k);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      double want = 0;
      for (int64_t i = 0; i < k; ++i)
        want += double(bf16_bits_to_float(x[r * ldx + i])) * bf16_bits_to_float(w[c * k + i]);
      EXPECT_EQ(bf16_bits_to_float(y[r * ldy + c]), float(want)) << r << "," << c;
    }
    EXPECT_EQ(y[r * ldy + n], 0xffff) << "past the row: untouched";
  }
}

}  // namespace
}  // namespace milesrt::kernels
