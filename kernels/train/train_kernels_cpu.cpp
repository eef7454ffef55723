// CPU references of the training kernels (train_kernels.hpp): the same formulas, in the same order.
#include <cmath>
#include <vector>

#include "kernels/decoder/bf16.hpp"
#include "kernels/decoder/decoder_kernels.hpp"
#include "kernels/train/train_kernels.hpp"

namespace milesrt::kernels {

void rmsnorm_backward_cpu(const uint16_t* dy, const uint16_t* x, const uint16_t* w,
                          const uint16_t* dres, uint16_t* dx, float* dw, int64_t rows, int64_t cols,
                          float eps) {
  const int64_t per_block = norm_rows_per_block(rows);
  const int64_t blocks = (rows + per_block - 1) / per_block;
  std::vector<float> partial(blocks * cols, 0.f);
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* xr = x + r * cols;
    const uint16_t* gr = dy + r * cols;
    double ss = 0;  // the GPU's tree order differs from this one by rounding only
    for (int64_t c = 0; c < cols; ++c)
      ss += double(bf16_bits_to_float(xr[c])) * bf16_bits_to_float(xr[c]);
    const float rstd = 1.f / std::sqrt(float(ss / double(cols)) + eps);
    double dot = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const float n = bf16_bits_to_float(xr[c]) * rstd;
      dot += double(bf16_bits_to_float(gr[c]) * bf16_bits_to_float(w[c])) * n;
    }
    const float mean = float(dot / double(cols));
    float* part = partial.data() + (r / per_block) * cols;
    for (int64_t c = 0; c < cols; ++c) {
      const float n = bf16_bits_to_float(xr[c]) * rstd;
      const float g = bf16_bits_to_float(gr[c]);
      float d = rstd * (g * bf16_bits_to_float(w[c]) - n * mean);
      if (dres != nullptr) d += bf16_bits_to_float(dres[r * cols + c]);
      dx[r * cols + c] = float_to_bf16_bits(d);
      part[c] += g * round_bf16(n);
    }
  }
  for (int64_t c = 0; c < cols; ++c) {
    float s = 0.f;
    for (int64_t b = 0; b < blocks; ++b) s += partial[b * cols + c];
    dw[c] = s;
  }
}

void rope_cpu(const uint16_t* x, const uint16_t* cos, const uint16_t* sin, uint16_t* out,
              int64_t rows, int64_t heads, int64_t d, bool backward) {
  const int64_t half = d / 2;
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* c = cos + r * d;
    const uint16_t* s = sin + r * d;
    for (int64_t h = 0; h < heads; ++h) {
      const uint16_t* xi = x + (r * heads + h) * d;
      uint16_t* o = out + (r * heads + h) * d;
      for (int64_t i = 0; i < half; ++i) {
        const float a = bf16_bits_to_float(xi[i]), b = bf16_bits_to_float(xi[i + half]);
        const float c1 = bf16_bits_to_float(c[i]), c2 = bf16_bits_to_float(c[i + half]);
        const float s1 = bf16_bits_to_float(s[i]), s2 = bf16_bits_to_float(s[i + half]);
        if (backward) {
          o[i] = float_to_bf16_bits(a * c1 + b * s2);
          o[i + half] = float_to_bf16_bits(b * c2 - a * s1);
        } else {
          o[i] = float_to_bf16_bits(round_bf16(a * c1) + round_bf16(-b * s1));
          o[i + half] = float_to_bf16_bits(round_bf16(b * c2) + round_bf16(a * s2));
        }
      }
    }
  }
}

void silu_mul_forward_cpu(const uint16_t* gate, const uint16_t* up, uint16_t* out, int64_t n) {
  for (int64_t k = 0; k < n; ++k) {
    const float g = bf16_bits_to_float(gate[k]);
    out[k] = float_to_bf16_bits(round_bf16(g / (1.0f + std::exp(-g))) * bf16_bits_to_float(up[k]));
  }
}

void silu_mul_backward_cpu(const uint16_t* dout, const uint16_t* gate, const uint16_t* up,
                           uint16_t* dgate, uint16_t* dup, int64_t n) {
  for (int64_t k = 0; k < n; ++k) {
    const float g = bf16_bits_to_float(gate[k]), u = bf16_bits_to_float(up[k]);
    const float d = bf16_bits_to_float(dout[k]);
    const float s = 1.0f / (1.0f + std::exp(-g));
    dup[k] = float_to_bf16_bits(d * round_bf16(g * s));
    dgate[k] = float_to_bf16_bits(d * u * (s * (1.0f + g * (1.0f - s))));
  }
}

void qk_norm_rope_cpu(const uint16_t* x, const uint16_t* w, const uint16_t* cos,
                      const uint16_t* sin, uint16_t* out, int64_t rows, int64_t heads, float eps) {
  constexpr int64_t d = 128;
  std::vector<uint16_t> h(x, x + rows * heads * d), normed(rows * heads * d);
  add_rmsnorm_cpu(h.data(), nullptr, w, normed.data(), rows * heads, d, eps);
  rope_cpu(normed.data(), cos, sin, out, rows, heads, d, false);
}

void qk_norm_rope_backward_cpu(const uint16_t* dout, const uint16_t* x, const uint16_t* w,
                               const uint16_t* cos, const uint16_t* sin, uint16_t* dx, float* dw,
                               int64_t rows, int64_t heads, float eps) {
  constexpr int64_t d = 128;
  std::vector<uint16_t> dy(rows * heads * d);
  rope_cpu(dout, cos, sin, dy.data(), rows, heads, d, true);
  rmsnorm_backward_cpu(dy.data(), x, w, nullptr, dx, dw, rows * heads, d, eps);
}

void logprob_backward_cpu(uint16_t* logits, int64_t rows, int64_t vocab, int64_t ld,
                          const int64_t* target, const float* lse, const float* entropy,
                          const float* g_lp, const float* g_ent, float temperature) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < vocab; ++j) {
      uint16_t& x = logits[r * ld + j];
      const float z = bf16_bits_to_float(x) / temperature;
      const float p = std::exp(z - lse[r]);
      float g = -(((z - lse[r]) + entropy[r]) * g_ent[r] + g_lp[r]) * p;
      if (j == target[r]) g += g_lp[r];
      x = float_to_bf16_bits(g / temperature);
    }
  }
}

}  // namespace milesrt::kernels
