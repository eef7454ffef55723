// The invariant GEMM's host reference (invariant_gemm.hpp).
#include "kernels/decoder/bf16.hpp"
#include "kernels/gemm/invariant_gemm.hpp"

namespace milesrt::kernels {

void invariant_gemm_bf16_cpu(const uint16_t* x, int64_t ldx, const uint16_t* w, uint16_t* y,
                             int64_t ldy, int64_t m, int64_t n, int64_t k) {
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      float acc = 0.f;
      for (int64_t i = 0; i < k; ++i)
        acc += bf16_bits_to_float(x[r * ldx + i]) * bf16_bits_to_float(w[c * k + i]);
      y[r * ldy + c] = float_to_bf16_bits(acc);
    }
  }
}

}  // namespace milesrt::kernels
