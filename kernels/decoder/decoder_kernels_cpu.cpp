// CPU references of the fused decoder kernels (decoder_kernels.hpp), rounding to bf16 where the
// ATen op sequence they replace does.
#include <cmath>
#include <vector>

#include "kernels/decoder/bf16.hpp"
#include "kernels/decoder/decoder_kernels.hpp"

namespace milesrt::kernels {
namespace {

/// RMSNorm of one row of n bf16 values into bf16 out: w * bf16(x * rsqrt(mean(x^2) + eps)).
void rms_row(const float* x, const uint16_t* w, uint16_t* out, int64_t n, float eps) {
  float ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss / float(n) + eps);
  for (int64_t i = 0; i < n; ++i)
    out[i] = float_to_bf16_bits(bf16_bits_to_float(w[i]) * round_bf16(x[i] * inv));
}

}  // namespace

void add_rmsnorm_cpu(uint16_t* h, const uint16_t* delta, const uint16_t* w, uint16_t* x,
                     int64_t rows, int64_t cols, float eps) {
  std::vector<float> row(cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      float v = bf16_bits_to_float(h[r * cols + c]);
      if (delta != nullptr) {
        v = round_bf16(v + bf16_bits_to_float(delta[r * cols + c]));
        h[r * cols + c] = float_to_bf16_bits(v);
      }
      row[c] = v;
    }
    rms_row(row.data(), w, x + r * cols, cols, eps);
  }
}

void qk_rope_append_cpu(const qk_rope_args& a) {
  constexpr int D = kFusedHeadDim;
  const int64_t width = (a.heads + 2 * a.kv_heads) * D;
  const auto* qkv = static_cast<const uint16_t*>(a.qkv);
  const auto* cos = static_cast<const uint16_t*>(a.cos);
  const auto* sin = static_cast<const uint16_t*>(a.sin);
  auto* q_out = static_cast<uint16_t*>(a.q_out);
  auto* kc = static_cast<uint16_t*>(a.k_cache);
  auto* vc = static_cast<uint16_t*>(a.v_cache);
  std::vector<float> x(D);
  std::vector<uint16_t> y(D);
  for (int64_t t = 0; t < a.tokens; ++t) {
    for (int64_t hr = 0; hr < a.heads + 2 * a.kv_heads; ++hr) {
      const uint16_t* src = qkv + t * width + hr * D;
      if (hr >= a.heads + a.kv_heads) {  // v: into the cache as it is
        const int64_t g = hr - a.heads - a.kv_heads;
        for (int d = 0; d < D; ++d) vc[(a.slots[t] * a.kv_heads + g) * D + d] = src[d];
        continue;
      }
      const bool is_q = hr < a.heads;
      const void* norm = is_q ? a.q_norm : a.k_norm;
      for (int d = 0; d < D; ++d) x[d] = bf16_bits_to_float(src[d]);
      if (norm != nullptr) {
        rms_row(x.data(), static_cast<const uint16_t*>(norm), y.data(), D, a.eps);
      } else {
        for (int d = 0; d < D; ++d) y[d] = src[d];
      }
      uint16_t* dst = is_q ? q_out + (t * a.heads + hr) * D
                           : kc + (a.slots[t] * a.kv_heads + (hr - a.heads)) * D;
      for (int d = 0; d < D; ++d) {
        const float v = bf16_bits_to_float(y[d]);
        const float rot =
            d < D / 2 ? -bf16_bits_to_float(y[d + D / 2]) : bf16_bits_to_float(y[d - D / 2]);
        const float c = bf16_bits_to_float(cos[t * D + d]), s = bf16_bits_to_float(sin[t * D + d]);
        dst[d] = float_to_bf16_bits(round_bf16(v * c) + round_bf16(rot * s));
      }
    }
  }
}

void silu_mul_cpu(const uint16_t* gate_up, uint16_t* out, int64_t rows, int64_t inter) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < inter; ++i) {
      const float g = bf16_bits_to_float(gate_up[r * 2 * inter + i]);
      const float u = bf16_bits_to_float(gate_up[r * 2 * inter + inter + i]);
      out[r * inter + i] = float_to_bf16_bits(round_bf16(g / (1.0f + std::exp(-g))) * u);
    }
  }
}

}  // namespace milesrt::kernels
