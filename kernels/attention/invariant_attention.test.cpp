#include "kernels/attention/invariant_attention.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/decoder/bf16.hpp"

namespace milesrt::kernels {
namespace {

constexpr int64_t D = 128;

/// Packed sequences of `lens` with random bf16 q [T, heads, D], k and v [T, kv_heads, D], each
/// row's sequence and position, each sequence's first row, and the host reference's arguments
/// over them (out and lse left to the test).
struct packed_batch {
  int64_t T = 0;
  std::vector<int32_t> seq, pos, start;
  std::vector<uint16_t> q, k, v;
  invariant_attention_args a;

  packed_batch(const std::vector<int32_t>& lens, int64_t heads, int64_t kv_heads, uint32_t seed) {
    for (int32_t s = 0; s < int32_t(lens.size()); ++s) {
      start.push_back(int32_t(T));
      for (int32_t j = 0; j < lens[s]; ++j) {
        seq.push_back(s);
        pos.push_back(j);
      }
      T += lens[s];
    }
    std::mt19937 gen(seed);
    std::normal_distribution<float> nd(0.f, 1.f);
    auto randv = [&](int64_t n) {
      std::vector<uint16_t> r(n);
      for (auto& x : r) x = float_to_bf16_bits(nd(gen));
      return r;
    };
    q = randv(T * heads * D);
    k = randv(T * kv_heads * D);
    v = randv(T * kv_heads * D);
    a.q = q.data();
    a.k = k.data();
    a.v = v.data();
    a.seq = seq.data();
    a.pos = pos.data();
    a.kv_start = start.data();
    a.rows = T;
    a.heads = heads;
    a.kv_heads = kv_heads;
    a.scale = 1.f / std::sqrt(float(D));
  }
};

// The host reference against plain causal softmax attention in double: two packed sequences
// (lengths 3 and 21: a partial key chunk and several), 4 query heads over 2 key heads.
TEST(InvariantAttentionCpu, IsCausalSoftmaxAttention) {
  constexpr int64_t H = 4, KH = 2;
  packed_batch b({3, 21}, H, KH, 5);
  const int64_t T = b.T;
  const auto &q = b.q, &k = b.k, &v = b.v;
  const auto &seq = b.seq, &pos = b.pos, &start = b.start;
  std::vector<uint16_t> out(T * H * D);
  std::vector<float> lse(H * T);
  invariant_attention_args a = b.a;
  a.out = out.data();
  a.lse = lse.data();
  invariant_attention_cpu(a);
  auto f = [](uint16_t bits) { return double(bf16_bits_to_float(bits)); };
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kvh = h / (H / KH), first = start[seq[t]];
      std::vector<double> s(pos[t] + 1);
      double mx = -1e300;
      for (int64_t j = 0; j <= pos[t]; ++j) {
        double dot = 0;
        for (int64_t i = 0; i < D; ++i)
          dot += f(q[(t * H + h) * D + i]) * f(k[((first + j) * KH + kvh) * D + i]);
        s[j] = dot * a.scale;
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (double x : s) sum += std::exp(x - mx);
      EXPECT_NEAR(lse[h * T + t], mx + std::log(sum), 1e-4) << t << "," << h;
      for (int64_t i = 0; i < D; i += 17) {
        double o = 0;
        for (int64_t j = 0; j <= pos[t]; ++j)
          o += std::exp(s[j] - mx) / sum * f(v[((first + j) * KH + kvh) * D + i]);
        EXPECT_NEAR(f(out[(t * H + h) * D + i]), o, 1e-2 * (1 + std::abs(o))) << t << "," << h;
      }
    }
  }
}

// The serving step's layouts: keys in a paged cache addressed through CSR page lists
// (page_indptr), and decode rows (no seq: row r is sequence r), give each query the packed
// layout's bits.
TEST(InvariantAttentionCpu, CsrPagesAndDecodeRowsMatchPackedKeys) {
  constexpr int64_t H = 2, KH = 1, B = 4;
  const std::vector<int32_t> lens = {7, 13};
  packed_batch b(lens, H, KH, 9);
  const int64_t T = b.T;
  const auto &q = b.q, &k = b.k, &v = b.v;
  const auto& start = b.start;
  invariant_attention_args a = b.a;
  std::vector<uint16_t> packed(T * H * D);
  a.out = packed.data();
  invariant_attention_cpu(a);

  // Pages: sequence 0 holds 2 blocks, sequence 1 holds 4, in shuffled order after one unused.
  std::vector<int32_t> order(7);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(3));
  const std::vector<int32_t> indptr = {1, 3, 7};
  std::vector<uint16_t> kc(7 * B * KH * D, 0), vc(kc.size(), 0);
  for (int32_t s = 0; s < 2; ++s)
    for (int32_t j = 0; j < lens[s]; ++j) {
      const int64_t slot = int64_t(order[indptr[s] + j / B]) * B + j % B;
      std::copy_n(k.begin() + (start[s] + j) * KH * D, KH * D, kc.begin() + slot * KH * D);
      std::copy_n(v.begin() + (start[s] + j) * KH * D, KH * D, vc.begin() + slot * KH * D);
    }
  // Decode rows: the last query of each sequence, one row a sequence.
  std::vector<uint16_t> q2(2 * H * D), out2(2 * H * D);
  const std::vector<int32_t> rows = {6, 19}, pos2 = {6, 12};
  for (int r = 0; r < 2; ++r)
    std::copy_n(q.begin() + rows[r] * H * D, H * D, q2.begin() + r * H * D);
  invariant_attention_args d = a;
  d.q = q2.data();
  d.k = kc.data();
  d.v = vc.data();
  d.seq = nullptr;
  d.pos = pos2.data();
  d.kv_start = nullptr;
  d.block_table = order.data();
  d.page_indptr = indptr.data();
  d.block_size = B;
  d.rows = 2;
  d.out = out2.data();
  invariant_attention_cpu(d);
  for (int r = 0; r < 2; ++r)
    for (int64_t e = 0; e < H * D; ++e)
      ASSERT_EQ(out2[r * H * D + e], packed[rows[r] * H * D + e]) << r << "," << e;
}

}  // namespace
}  // namespace milesrt::kernels
