// The batch-invariant attention (invariant_attention.hpp) on the GPU.
#include <cuda_runtime.h>

#include <cfloat>
#include <stdexcept>

#include "kernels/attention/invariant_attention.hpp"
#include "kernels/cuda_check.cuh"
#include "kernels/decoder/bf16.hpp"
#include "kernels/warp_reduce.cuh"

namespace milesrt::kernels {
namespace {

constexpr int kD = 128;
constexpr int kWarps = 4;

__device__ __forceinline__ void load4(const uint16_t* p, float (&v)[4]) {
  uint16_t b[4];
  *reinterpret_cast<uint2*>(b) = *reinterpret_cast<const uint2*>(p);
  for (int i = 0; i < 4; ++i) v[i] = bf16_bits_to_float(b[i]);
}

__device__ __forceinline__ int64_t key_row(const invariant_attention_args& a, int32_t s,
                                           int64_t j) {
  if (a.kv_start != nullptr) return int64_t(a.kv_start[s]) + j;
  const int64_t first = a.page_indptr != nullptr ? a.page_indptr[s] : int64_t(s) * a.max_blocks;
  const int64_t block = a.block_table[first + j / a.block_size];
  return block * a.block_size + j % a.block_size;
}

__global__ void __launch_bounds__(32 * kWarps)
    invariant_attention_kernel(invariant_attention_args a) {
  const int lane = threadIdx.x % 32;
  const int64_t rh = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (rh >= a.rows * a.heads) return;
  const int64_t row = rh / a.heads, h = rh % a.heads;
  const int64_t kvh = h / (a.heads / a.kv_heads);
  const auto* q = static_cast<const uint16_t*>(a.q);
  const auto* kp = static_cast<const uint16_t*>(a.k);
  const auto* vp = static_cast<const uint16_t*>(a.v);
  float qv[4];
  load4(q + rh * kD + 4 * lane, qv);
  const int32_t s = a.seq != nullptr ? a.seq[row] : int32_t(row);
  const int64_t n = int64_t(a.pos[row]) + 1;
  float m = -FLT_MAX, l = 0.f, acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int64_t j0 = 0; j0 < n; j0 += kInvariantKeyChunk) {
    float sc[kInvariantKeyChunk], vv[kInvariantKeyChunk][4];
    for (int u = 0; u < kInvariantKeyChunk; ++u) {  // the chunk's loads first
      float kv[4] = {0.f, 0.f, 0.f, 0.f};
      if (j0 + u < n) {
        const int64_t r = key_row(a, s, j0 + u);
        load4(kp + (r * a.kv_heads + kvh) * kD + 4 * lane, kv);
        load4(vp + (r * a.kv_heads + kvh) * kD + 4 * lane, vv[u]);
      }
      sc[u] = ((qv[0] * kv[0] + qv[1] * kv[1]) + qv[2] * kv[2]) + qv[3] * kv[3];
    }
    float cm = -FLT_MAX;
    for (int u = 0; u < kInvariantKeyChunk; ++u) {
      sc[u] = warp_sum(sc[u]) * a.scale;
      if (j0 + u < n) cm = fmaxf(cm, sc[u]);
    }
    const float mn = fmaxf(m, cm);
    const float corr = m == -FLT_MAX ? 0.f : expf(m - mn);
    l *= corr;
    for (int i = 0; i < 4; ++i) acc[i] *= corr;
    for (int u = 0; u < kInvariantKeyChunk && j0 + u < n; ++u) {
      const float p = expf(sc[u] - mn);
      l += p;
      for (int i = 0; i < 4; ++i) acc[i] += p * vv[u][i];
    }
    m = mn;
  }
  uint16_t o[4];
  for (int i = 0; i < 4; ++i) o[i] = float_to_bf16_bits(acc[i] / l);
  *reinterpret_cast<uint2*>(static_cast<uint16_t*>(a.out) + rh * kD + 4 * lane) =
      *reinterpret_cast<const uint2*>(o);
  if (a.lse != nullptr && lane == 0) a.lse[h * a.rows + row] = m + logf(l);
}

}  // namespace

void invariant_attention_cuda(const invariant_attention_args& a, void* stream) {
  if (a.rows == 0) return;
  if (a.kv_heads <= 0 || a.heads % a.kv_heads != 0)
    throw std::invalid_argument("invariant attention: heads must be a multiple of kv_heads");
  if ((a.kv_start == nullptr) == (a.block_table == nullptr))
    throw std::invalid_argument("invariant attention: give packed key rows or a block table");
  const int64_t warps = a.rows * a.heads;
  invariant_attention_kernel<<<unsigned((warps + kWarps - 1) / kWarps), 32 * kWarps, 0,
                               static_cast<cudaStream_t>(stream)>>>(a);
  MILESRT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace milesrt::kernels
