// The batch-invariant attention (invariant_attention.hpp) on the GPU's tensor cores.
//
// A warp computes one tile of 16 (query, head) rows that share a key head: 16 consecutive query
// rows of one head (a prefill or training batch), or, where each row is its own sequence's only
// query (a decode step), one row's query heads of a group. For each sequence present in the tile
// (one pass a sequence; the rows of other sequences are masked out of that pass, an exact no-op
// for them) it walks the keys 0..max pos in tiles of kInvariantKeyTile: S = Q K^T by mma.m16n8k16
// (bf16 in, fp32 out, the head dimension walked in the same 8 steps), an fp32 online softmax in
// base 2, P rounded to bf16, O += P V by mma. A row's result depends only on its own query and
// keys: every tile row is computed by the same instructions whatever the other rows hold; keys
// past the row's position get probability 0, and tiles wholly past it leave its state unchanged
// (a correction factor of exactly 1, products of exactly 0).
//
// The dimension each lane holds is permuted (the same permutation for Q and K, and for V's and
// O's columns) so that every load and store is 16 bytes from a row without shared memory:
//   S: a lane (g = lane/4, q = lane%4) holds dims 8q + 32c + 0..7 (c = 0..3) of Q rows g, g+8 and
//      of keys; the k-step ks takes the words 2h, 2h+1 (h = ks%2) of its c = ks/2.
//   O: logical column (n-tile nt, column n) is dim 16n + nt: a lane loads V[key][16g..16g+15] and
//      holds O[row][32q + nt] and O[row][32q + 16 + nt].
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <stdexcept>

#include "kernels/attention/invariant_attention.hpp"
#include "kernels/cuda_check.cuh"

namespace milesrt::kernels {
namespace {

constexpr int kD = 128;
constexpr int kWarps = 4;
constexpr int kKeys = kInvariantKeyTile;
static_assert(kKeys == 16, "one mma k-step of P V a key tile");
constexpr unsigned kFull = 0xffffffffu;

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm(  // pure: free to schedule around the loads
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 p = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&p);
}

__device__ __forceinline__ uint4 load16(const uint16_t* p) {
  return *reinterpret_cast<const uint4*>(p);
}

__device__ __forceinline__ int64_t key_row(const invariant_attention_args& a, int32_t s,
                                           int64_t j) {
  if (a.kv_start != nullptr) return int64_t(a.kv_start[s]) + j;
  const int64_t first = a.page_indptr != nullptr ? a.page_indptr[s] : int64_t(s) * a.max_blocks;
  const int64_t block = a.block_table[first + j / a.block_size];
  return block * a.block_size + j % a.block_size;
}

/// A warp's running state for its rows g (i = 0) and g + 8 (i = 1).
struct tile_state {
  uint4 q[2][4];  ///< the rows' queries, dims 8q + 32c + 0..7
  float o[16][4] = {};
  float m[2] = {-INFINITY, -INFINITY};  ///< running max of the base-2 scores
  float l[2] = {0.f, 0.f};              ///< this lane's share of the running sum
};

/// One key tile [k0, k0 + kKeys) of sequence s for the rows act[] (position pos[]); keys at or past
/// lim are not read (zeros).
__device__ __forceinline__ void key_tile(const invariant_attention_args& a, tile_state& st,
                                         int32_t s, int64_t kvh, int64_t k0, int64_t lim,
                                         const bool (&act)[2], const int32_t (&pos)[2], int g,
                                         int qd, float scale2) {
  const auto* kp = static_cast<const uint16_t*>(a.k);
  const auto* vp = static_cast<const uint16_t*>(a.v);
  const uint4 zero = make_uint4(0, 0, 0, 0);
  uint4 kk[2][4], vv[4][2];
  for (int t = 0; t < 2; ++t) {
    const int64_t j = k0 + 8 * t + g;
    const uint16_t* kr =
        j < lim ? kp + (key_row(a, s, j) * a.kv_heads + kvh) * kD + 8 * qd : nullptr;
    for (int c = 0; c < 4; ++c) kk[t][c] = kr != nullptr ? load16(kr + 32 * c) : zero;
  }
  for (int u = 0; u < 4; ++u) {  // keys 2q, 2q+1, 2q+8, 2q+9 of the tile
    const int64_t j = k0 + 2 * qd + (u & 1) + 8 * (u >> 1);
    const uint16_t* vr =
        j < lim ? vp + (key_row(a, s, j) * a.kv_heads + kvh) * kD + 16 * g : nullptr;
    vv[u][0] = vr != nullptr ? load16(vr) : zero;
    vv[u][1] = vr != nullptr ? load16(vr + 8) : zero;
  }
  float sc[2][4] = {};
  for (int t = 0; t < 2; ++t) {
    for (int ks = 0; ks < 8; ++ks) {
      const int c = ks >> 1, w = 2 * (ks & 1);
      const uint32_t qa[4] = {word(st.q[0][c], w), word(st.q[1][c], w), word(st.q[0][c], w + 1),
                              word(st.q[1][c], w + 1)};
      mma_bf16(sc[t], qa, word(kk[t][c], w), word(kk[t][c], w + 1));
    }
  }
  for (int i = 0; i < 2; ++i) {
    float mx = -INFINITY;
    for (int t = 0; t < 2; ++t) {
      for (int e = 0; e < 2; ++e) {
        const int64_t j = k0 + 8 * t + 2 * qd + e;
        const float x = act[i] && j <= pos[i] ? sc[t][2 * i + e] * scale2 : -INFINITY;
        sc[t][2 * i + e] = x;
        mx = fmaxf(mx, x);
      }
    }
    mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 2));
    const float mn = fmaxf(st.m[i], mx);
    const bool none = mn == -INFINITY;  // no key of this row yet: nothing changes
    const float corr = none ? 1.f : exp2f(st.m[i] - mn);
    float sum = 0.f;
    for (int t = 0; t < 2; ++t) {
      for (int e = 0; e < 2; ++e) {
        const float p = none ? 0.f : exp2f(sc[t][2 * i + e] - mn);
        sc[t][2 * i + e] = p;
        sum += p;
      }
    }
    st.l[i] = st.l[i] * corr + sum;
    st.m[i] = mn;
    for (int nt = 0; nt < 16; ++nt) {
      st.o[nt][2 * i] *= corr;
      st.o[nt][2 * i + 1] *= corr;
    }
  }
  const uint32_t pa[4] = {pack_bf16(sc[0][0], sc[0][1]), pack_bf16(sc[0][2], sc[0][3]),
                          pack_bf16(sc[1][0], sc[1][1]), pack_bf16(sc[1][2], sc[1][3])};
  for (int nt = 0; nt < 16; ++nt) {
    const int wi = nt >> 1;
    const unsigned sel = (nt & 1) ? 0x7632u : 0x5410u;  // the high or the low halves
    const uint32_t b0 =
        __byte_perm(word(vv[0][wi >> 2], wi & 3), word(vv[1][wi >> 2], wi & 3), sel);
    const uint32_t b1 =
        __byte_perm(word(vv[2][wi >> 2], wi & 3), word(vv[3][wi >> 2], wi & 3), sel);
    mma_bf16(st.o[nt], pa, b0, b1);
  }
}

__device__ __forceinline__ int warp_max(int v) {
  for (int o = 16; o > 0; o /= 2) v = max(v, __shfl_xor_sync(kFull, v, o));
  return v;
}

__global__ void __launch_bounds__(32 * kWarps)
    invariant_attention_kernel(invariant_attention_args a, bool by_group) {
  const int lane = threadIdx.x % 32, g = lane >> 2, qd = lane & 3;
  const int64_t item = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int64_t group = a.heads / a.kv_heads;
  int64_t row[2], head[2];
  bool valid[2];
  if (by_group) {  // row r's query heads of key head kvh
    if (item >= a.rows * a.kv_heads) return;
    const int64_t r = item / a.kv_heads, kvh = item % a.kv_heads;
    for (int i = 0; i < 2; ++i) {
      row[i] = r;
      head[i] = kvh * group + min(int64_t(g + 8 * i), group - 1);
      valid[i] = g + 8 * i < group;
    }
  } else {  // 16 consecutive rows of head h
    const int64_t tiles = (a.rows + 15) / 16;
    if (item >= tiles * a.heads) return;
    const int64_t h = item % a.heads, r0 = item / a.heads * 16;
    for (int i = 0; i < 2; ++i) {
      valid[i] = r0 + g + 8 * i < a.rows;
      row[i] = min(r0 + g + 8 * i, a.rows - 1);
      head[i] = h;
    }
  }
  const int64_t kvh = head[0] / group;
  tile_state st;
  const auto* qp = static_cast<const uint16_t*>(a.q);
  int32_t seq[2], pos[2];
  bool done[2];
  for (int i = 0; i < 2; ++i) {
    const uint16_t* qr = qp + (row[i] * a.heads + head[i]) * kD + 8 * qd;
    for (int c = 0; c < 4; ++c) st.q[i][c] = load16(qr + 32 * c);
    seq[i] = a.seq != nullptr ? a.seq[row[i]] : int32_t(row[i]);
    pos[i] = a.pos[row[i]];
    done[i] = !valid[i];
  }
  const float scale2 = a.scale * kInvariantLog2e;
  for (;;) {  // one pass a sequence of the tile's rows
    const unsigned lo = __ballot_sync(kFull, !done[0]), hi = __ballot_sync(kFull, !done[1]);
    if ((lo | hi) == 0) break;
    const int32_t s = __shfl_sync(kFull, lo ? seq[0] : seq[1], __ffs(lo ? lo : hi) - 1);
    bool act[2];
    int lim = 0;
    for (int i = 0; i < 2; ++i) {
      act[i] = !done[i] && seq[i] == s;
      if (act[i]) lim = max(lim, pos[i] + 1);
    }
    lim = warp_max(lim);
    for (int64_t k0 = 0; k0 < lim; k0 += kKeys)
      key_tile(a, st, s, kvh, k0, lim, act, pos, g, qd, scale2);
    for (int i = 0; i < 2; ++i) done[i] = done[i] || act[i];
  }
  for (int i = 0; i < 2; ++i) {
    float l = st.l[i] + __shfl_xor_sync(kFull, st.l[i], 1);
    l += __shfl_xor_sync(kFull, l, 2);
    if (!valid[i]) continue;
    uint32_t w[16];
    for (int nt = 0; nt < 16; nt += 2) {
      w[nt / 2] = pack_bf16(st.o[nt][2 * i] / l, st.o[nt + 1][2 * i] / l);
      w[8 + nt / 2] = pack_bf16(st.o[nt][2 * i + 1] / l, st.o[nt + 1][2 * i + 1] / l);
    }
    auto* out = static_cast<uint16_t*>(a.out) + (row[i] * a.heads + head[i]) * kD + 32 * qd;
    for (int c = 0; c < 4; ++c)
      *reinterpret_cast<uint4*>(out + 8 * c) =
          make_uint4(w[4 * c], w[4 * c + 1], w[4 * c + 2], w[4 * c + 3]);
    if (a.lse != nullptr && qd == 0)
      a.lse[head[i] * a.rows + row[i]] = (st.m[i] + log2f(l)) * kInvariantLn2;
  }
}

}  // namespace

void invariant_attention_cuda(const invariant_attention_args& a, void* stream) {
  if (a.rows == 0) return;
  if (a.kv_heads <= 0 || a.heads % a.kv_heads != 0)
    throw std::invalid_argument("invariant attention: heads must be a multiple of kv_heads");
  if ((a.kv_start == nullptr) == (a.block_table == nullptr))
    throw std::invalid_argument("invariant attention: give packed key rows or a block table");
  // One query a sequence (no seq): a tile holds a row's query heads of one key head.
  const bool by_group = a.seq == nullptr && a.heads / a.kv_heads <= 16;
  const int64_t items = by_group ? a.rows * a.kv_heads : (a.rows + 15) / 16 * a.heads;
  invariant_attention_kernel<<<unsigned((items + kWarps - 1) / kWarps), 32 * kWarps, 0,
                               static_cast<cudaStream_t>(stream)>>>(a, by_group);
  MILESRT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace milesrt::kernels
