// The batch-invariant attention's host reference (invariant_attention.hpp): the same key tiles and
// base-2 online softmax in fp32 with bf16 probabilities for P V (the GPU's dot products are tensor
// core sums: equal within rounding).
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kernels/attention/invariant_attention.hpp"
#include "kernels/decoder/bf16.hpp"

namespace milesrt::kernels {

void invariant_attention_cpu(const invariant_attention_args& a) {
  constexpr int64_t D = 128;
  if (a.kv_heads <= 0 || a.heads % a.kv_heads != 0)
    throw std::invalid_argument("invariant attention: heads must be a multiple of kv_heads");
  const auto* q = static_cast<const uint16_t*>(a.q);
  const auto* kp = static_cast<const uint16_t*>(a.k);
  const auto* vp = static_cast<const uint16_t*>(a.v);
  auto* out = static_cast<uint16_t*>(a.out);
  const float scale2 = a.scale * kInvariantLog2e;
  auto key_row = [&](int32_t s, int64_t j) -> int64_t {
    if (a.kv_start != nullptr) return int64_t(a.kv_start[s]) + j;
    const int64_t first = a.page_indptr != nullptr ? a.page_indptr[s] : int64_t(s) * a.max_blocks;
    return int64_t(a.block_table[first + j / a.block_size]) * a.block_size + j % a.block_size;
  };
  for (int64_t row = 0; row < a.rows; ++row) {
    for (int64_t h = 0; h < a.heads; ++h) {
      const int64_t kvh = h / (a.heads / a.kv_heads);
      const uint16_t* qr = q + (row * a.heads + h) * D;
      const int64_t n = int64_t(a.pos[row]) + 1;
      const int32_t sq = a.seq != nullptr ? a.seq[row] : int32_t(row);
      // Base-2 scores, tiles of kInvariantKeyTile keys, probabilities rounded to bf16 for P V.
      float m = -INFINITY, l = 0.f, acc[D] = {};
      for (int64_t j0 = 0; j0 < n; j0 += kInvariantKeyTile) {
        const int64_t e = std::min<int64_t>(n, j0 + kInvariantKeyTile);
        float sc[kInvariantKeyTile];
        float cm = -INFINITY;
        for (int64_t j = j0; j < e; ++j) {
          const uint16_t* kr = kp + (key_row(sq, j) * a.kv_heads + kvh) * D;
          float dot = 0.f;
          for (int64_t i = 0; i < D; ++i)
            dot += bf16_bits_to_float(qr[i]) * bf16_bits_to_float(kr[i]);
          sc[j - j0] = dot * scale2;
          cm = std::max(cm, sc[j - j0]);
        }
        const float mn = std::max(m, cm);
        const float corr = std::exp2(m - mn);
        l *= corr;
        for (float& x : acc) x *= corr;
        for (int64_t j = j0; j < e; ++j) {
          const uint16_t* vr = vp + (key_row(sq, j) * a.kv_heads + kvh) * D;
          const float p = std::exp2(sc[j - j0] - mn);
          l += p;
          const float pb = round_bf16(p);
          for (int64_t i = 0; i < D; ++i) acc[i] += pb * bf16_bits_to_float(vr[i]);
        }
        m = mn;
      }
      for (int64_t i = 0; i < D; ++i)
        out[(row * a.heads + h) * D + i] = float_to_bf16_bits(acc[i] / l);
      if (a.lse != nullptr) a.lse[h * a.rows + row] = (m + std::log2(l)) * kInvariantLn2;
    }
  }
}

}  // namespace milesrt::kernels
