#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/attention/invariant_attention.hpp"
#include "kernels/cuda_testing.hpp"
#include "kernels/device.hpp"

namespace milesrt::kernels {
namespace {

#ifdef MILESRT_HAVE_CUDA
struct run_out {
  std::vector<uint16_t> out;
  std::vector<float> lse;
};

/// Runs the kernel on the GPU or the host over host copies of the inputs.
run_out run(bool gpu, invariant_attention_args a, const std::vector<uint16_t>& q,
            const std::vector<uint16_t>& k, const std::vector<uint16_t>& v,
            const std::vector<int32_t>& seq, const std::vector<int32_t>& pos,
            const std::vector<int32_t>& start, const std::vector<int32_t>& table) {
  run_out r{std::vector<uint16_t>(q.size()), std::vector<float>(a.heads * a.rows)};
  if (!gpu) {
    a.q = q.data();
    a.k = k.data();
    a.v = v.data();
    a.seq = seq.empty() ? nullptr : seq.data();
    a.pos = pos.data();
    a.kv_start = start.empty() ? nullptr : start.data();
    a.block_table = table.empty() ? nullptr : table.data();
    a.out = r.out.data();
    a.lse = r.lse.data();
    invariant_attention_cpu(a);
    return r;
  }
  using testing::dev;
  auto *dq = dev(q), *dk = dev(k), *dv = dev(v), *dout = dev(r.out);
  int32_t* ds = seq.empty() ? nullptr : dev(seq);
  int32_t* dp = dev(pos);
  int32_t* dstart = start.empty() ? nullptr : dev(start);
  int32_t* dtable = table.empty() ? nullptr : dev(table);
  float* dlse = dev(r.lse);
  a.q = dq;
  a.k = dk;
  a.v = dv;
  a.seq = ds;
  a.pos = dp;
  a.kv_start = dstart;
  a.block_table = dtable;
  a.out = dout;
  a.lse = dlse;
  invariant_attention_cuda(a, nullptr);
  r.out = testing::host(dout, r.out.size());
  r.lse = testing::host(dlse, r.lse.size());
  for (void* p : {(void*)dq, (void*)dk, (void*)dv, (void*)dout, (void*)ds, (void*)dp, (void*)dstart,
                  (void*)dtable, (void*)dlse})
    if (p) cudaFree(p);
  return r;
}
#endif

// The GPU kernel against its host reference (packed keys, GQA 16/8, sequences of 5, 40 and 200),
// and the property the true on-policy mode needs: each query of those sequences computed again
// one at a time as a decode step would (keys in a paged cache of shuffled 16-slot blocks, beside
// other sequences' queries, with and without each row's sequence given) and in a chunk of a
// prefill gives the same output and log-sum-exp, bit for bit.
TEST(InvariantAttentionCuda, AQueryGetsTheSameResultPackedOrPagedAlone) {
#ifndef MILESRT_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA kernels";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  constexpr int64_t D = 128, H = 16, KH = 8, B = 16;
  const std::vector<int32_t> lens = {5, 40, 200};
  std::vector<int32_t> start, seq, pos;
  int32_t T = 0;
  for (int32_t s = 0; s < 3; ++s) {
    start.push_back(T);
    for (int32_t j = 0; j < lens[s]; ++j) {
      seq.push_back(s);
      pos.push_back(j);
    }
    T += lens[s];
  }
  auto q = testing::random_bf16(T * H * D, 41, 0.f, 1.f);
  auto k = testing::random_bf16(T * KH * D, 42, 0.f, 1.f);
  auto v = testing::random_bf16(T * KH * D, 43, 0.f, 1.f);
  invariant_attention_args a;
  a.rows = T;
  a.heads = H;
  a.kv_heads = KH;
  a.scale = 1.f / std::sqrt(float(D));
  const auto packed = run(true, a, q, k, v, seq, pos, start, {});
  const auto ref = run(false, a, q, k, v, seq, pos, start, {});
  double worst = 0, worst_lse = 0;
  for (size_t i = 0; i < ref.out.size(); ++i)
    worst = std::max(worst, double(std::abs(bf16_bits_to_float(packed.out[i]) -
                                            bf16_bits_to_float(ref.out[i]))));
  for (size_t i = 0; i < ref.lse.size(); ++i)
    worst_lse = std::max(worst_lse, double(std::abs(packed.lse[i] - ref.lse[i])));
  EXPECT_LT(worst, 2e-2);  // outputs of order 0.1-1 in bf16
  EXPECT_LT(worst_lse, 1e-4);

  // The paged cache: each sequence's keys in shuffled blocks of 16 slots, a 4th sequence beside.
  const int64_t max_blocks = (200 + B - 1) / B, seqs = 4, blocks = seqs * max_blocks;
  std::vector<int32_t> order(blocks);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  std::vector<int32_t> table(seqs * max_blocks);
  for (int64_t i = 0; i < seqs * max_blocks; ++i) table[i] = order[i];
  std::vector<uint16_t> kc(blocks * B * KH * D, 0), vc(kc.size(), 0);
  auto other_k = testing::random_bf16(max_blocks * B * KH * D, 44, 0.f, 1.f);
  for (int32_t s = 0; s < seqs; ++s) {
    const int32_t n = s < 3 ? lens[s] : int32_t(max_blocks * B);
    for (int32_t j = 0; j < n; ++j) {
      const int64_t slot = int64_t(table[s * max_blocks + j / B]) * B + j % B;
      for (int64_t e = 0; e < KH * D; ++e) {
        kc[slot * KH * D + e] = s < 3 ? k[(start[s] + j) * KH * D + e] : other_k[j * KH * D + e];
        vc[slot * KH * D + e] = s < 3 ? v[(start[s] + j) * KH * D + e] : other_k[j * KH * D + e];
      }
    }
  }
  // Decode-like calls: one query of each of the three sequences at a time, the 4th sequence's
  // last query beside it (first or second row of the call), once with each row's sequence given
  // (tiles of rows, one pass a sequence) and once without (a decode step: a tile of a row's heads).
  a.max_blocks = max_blocks;
  a.block_size = B;
  int64_t differ = 0, differ_lse = 0, differ_decode = 0;
  for (int32_t t = 0; t < T; ++t) {
    const bool first = t % 2 == 0;
    std::vector<int32_t> s2 = {seq[t], 3}, p2 = {pos[t], int32_t(max_blocks * B - 1)};
    if (!first) {
      std::swap(s2[0], s2[1]);
      std::swap(p2[0], p2[1]);
    }
    std::vector<uint16_t> q2(2 * H * D);
    auto other_q = testing::random_bf16(H * D, 45 + t, 0.f, 1.f);
    std::copy(q.begin() + t * H * D, q.begin() + (t + 1) * H * D, q2.begin() + (first ? 0 : H * D));
    std::copy(other_q.begin(), other_q.end(), q2.begin() + (first ? H * D : 0));
    a.rows = 2;
    const auto one = run(true, a, q2, kc, vc, s2, p2, {}, table);
    const int64_t at = first ? 0 : 1;
    for (int64_t e = 0; e < H * D; ++e)
      differ += one.out[at * H * D + e] != packed.out[t * H * D + e];
    for (int64_t h = 0; h < H; ++h) differ_lse += one.lse[h * 2 + at] != packed.lse[h * T + t];
    // Row r is sequence r: the call's own table rows.
    std::vector<int32_t> t2(2 * max_blocks);
    for (int r = 0; r < 2; ++r)
      std::copy_n(table.begin() + s2[r] * max_blocks, max_blocks, t2.begin() + r * max_blocks);
    const auto dec = run(true, a, q2, kc, vc, {}, p2, {}, t2);
    for (int64_t e = 0; e < H * D; ++e)
      differ_decode += dec.out[at * H * D + e] != packed.out[t * H * D + e];
    for (int64_t h = 0; h < H; ++h) differ_decode += dec.lse[h * 2 + at] != packed.lse[h * T + t];
  }
  EXPECT_EQ(differ, 0) << "output values that differ, of " << T * H * D;
  EXPECT_EQ(differ_lse, 0);
  EXPECT_EQ(differ_decode, 0) << "decode-step values that differ";

  // A chunked prefill: queries 150..199 of the third sequence, then the first sequence's five, in
  // one call over the paged cache (tiles that hold two sequences).
  std::vector<int32_t> sc, pc, src;
  for (int32_t j = 150; j < 200; ++j) src.push_back(start[2] + j);
  for (int32_t j = 0; j < 5; ++j) src.push_back(j);
  std::vector<uint16_t> qc(src.size() * H * D);
  for (size_t r = 0; r < src.size(); ++r) {
    sc.push_back(seq[src[r]]);
    pc.push_back(pos[src[r]]);
    std::copy_n(q.begin() + src[r] * H * D, H * D, qc.begin() + r * H * D);
  }
  a.rows = int64_t(src.size());
  const auto chunk = run(true, a, qc, kc, vc, sc, pc, {}, table);
  int64_t differ_chunk = 0;
  for (size_t r = 0; r < src.size(); ++r)
    for (int64_t e = 0; e < H * D; ++e)
      differ_chunk += chunk.out[r * H * D + e] != packed.out[src[r] * H * D + e];
  EXPECT_EQ(differ_chunk, 0) << "chunk values that differ";
#endif
}

}  // namespace
}  // namespace milesrt::kernels
