// The fused decoder kernels (decoder_kernels.hpp) on the GPU.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda_check.cuh"
#include "kernels/decoder/bf16.hpp"
#include "kernels/decoder/decoder_kernels.hpp"
#include "kernels/warp_reduce.cuh"

namespace milesrt::kernels {
namespace {

constexpr int kNormThreads = 256;

// One block per row: sum = h + delta (bf16; sum may be h itself), x = RMSNorm(sum) * w. The row
// lives in shared memory between the two passes; the sum of squares is reduced in a fixed order.
__global__ void __launch_bounds__(kNormThreads)
    add_rmsnorm_kernel(const uint16_t* h, const uint16_t* __restrict__ delta, uint16_t* sum,
                       const uint16_t* __restrict__ w, uint16_t* __restrict__ x, int64_t cols,
                       float eps) {
  extern __shared__ float row[];
  __shared__ float partial[kNormThreads / 32];
  const int64_t r = blockIdx.x;
  const uint16_t* hr = h + r * cols;
  float ss = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += kNormThreads) {
    float v = bf16_bits_to_float(hr[c]);
    if (delta != nullptr) {
      v = round_bf16(v + bf16_bits_to_float(delta[r * cols + c]));
      sum[r * cols + c] = float_to_bf16_bits(v);
    }
    row[c] = v;
    ss += v * v;
  }
  ss = warp_sum(ss);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = ss;
  __syncthreads();
  if (threadIdx.x < 32) {
    float p = threadIdx.x < kNormThreads / 32 ? partial[threadIdx.x] : 0.f;
    p = warp_sum(p);
    if (threadIdx.x == 0) partial[0] = p;
  }
  __syncthreads();
  const float inv = rsqrtf(partial[0] / float(cols) + eps);
  for (int64_t c = threadIdx.x; c < cols; c += kNormThreads)
    x[r * cols + c] = float_to_bf16_bits(bf16_bits_to_float(w[c]) * round_bf16(row[c] * inv));
}

// One warp per (token, head row) of the QKV projection; each lane holds 4 of the 128 values.
__global__ void qk_rope_append_kernel(qk_rope_args a) {
  constexpr int D = kFusedHeadDim;
  const int lane = threadIdx.x % 32;
  const int64_t hr = int64_t(blockIdx.y) * (blockDim.x / 32) + threadIdx.x / 32;
  const int64_t rows = a.heads + 2 * a.kv_heads;
  if (hr >= rows) return;
  const int64_t t = blockIdx.x;
  const auto* src = static_cast<const uint16_t*>(a.qkv) + (t * rows + hr) * D + 4 * lane;
  uint16_t in[4];
  *reinterpret_cast<uint2*>(in) = *reinterpret_cast<const uint2*>(src);
  const int64_t slot = a.slots[t];
  if (hr >= a.heads + a.kv_heads) {  // v: into the cache as it is
    auto* dst = static_cast<uint16_t*>(a.v_cache) +
                (slot * a.kv_heads + (hr - a.heads - a.kv_heads)) * D + 4 * lane;
    *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(in);
    return;
  }
  const bool is_q = hr < a.heads;
  const auto* norm = static_cast<const uint16_t*>(is_q ? a.q_norm : a.k_norm);
  float y[4];
  for (int i = 0; i < 4; ++i) y[i] = bf16_bits_to_float(in[i]);
  if (norm != nullptr) {
    float ss = y[0] * y[0] + y[1] * y[1] + y[2] * y[2] + y[3] * y[3];
    ss = warp_sum(ss);
    const float inv = rsqrtf(ss / float(D) + a.eps);
    for (int i = 0; i < 4; ++i)
      y[i] = round_bf16(bf16_bits_to_float(norm[4 * lane + i]) * round_bf16(y[i] * inv));
  }
  // rotate_half: element d < 64 pairs with d + 64, which lane (lane + 16) % 32 holds.
  const auto* cs = static_cast<const uint16_t*>(a.cos) + t * D + 4 * lane;
  const auto* sn = static_cast<const uint16_t*>(a.sin) + t * D + 4 * lane;
  uint16_t out[4];
  for (int i = 0; i < 4; ++i) {
    const float partner = __shfl_xor_sync(0xffffffffu, y[i], 16);
    const float rot = lane < 16 ? -partner : partner;
    out[i] = float_to_bf16_bits(round_bf16(y[i] * bf16_bits_to_float(cs[i])) +
                                round_bf16(rot * bf16_bits_to_float(sn[i])));
  }
  uint16_t* dst = is_q ? static_cast<uint16_t*>(a.q_out) + (t * a.heads + hr) * D + 4 * lane
                       : static_cast<uint16_t*>(a.k_cache) +
                             (slot * a.kv_heads + (hr - a.heads)) * D + 4 * lane;
  *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(out);
}

__global__ void silu_mul_kernel(const uint16_t* __restrict__ gu, uint16_t* __restrict__ out,
                                int64_t rows, int64_t inter) {
  const int64_t n = rows * inter;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = k / inter, i = k % inter;
    const float g = bf16_bits_to_float(gu[r * 2 * inter + i]);
    const float u = bf16_bits_to_float(gu[r * 2 * inter + inter + i]);
    out[k] = float_to_bf16_bits(round_bf16(g / (1.0f + expf(-g))) * u);
  }
}

}  // namespace

void add_rmsnorm_out_cuda(const void* h, const void* delta, void* sum, const void* w, void* x,
                          int64_t rows, int64_t cols, float eps, void* stream) {
  if (rows == 0) return;
  add_rmsnorm_kernel<<<unsigned(rows), kNormThreads, cols * sizeof(float),
                       static_cast<cudaStream_t>(stream)>>>(
      static_cast<const uint16_t*>(h), static_cast<const uint16_t*>(delta),
      static_cast<uint16_t*>(sum), static_cast<const uint16_t*>(w), static_cast<uint16_t*>(x), cols,
      eps);
  MILESRT_CUDA_CHECK(cudaGetLastError());
}

void add_rmsnorm_cuda(void* h, const void* delta, const void* w, void* x, int64_t rows,
                      int64_t cols, float eps, void* stream) {
  add_rmsnorm_out_cuda(h, delta, h, w, x, rows, cols, eps, stream);
}

void qk_rope_append_cuda(const qk_rope_args& a, void* stream) {
  if (a.tokens == 0) return;
  constexpr int kWarps = 4;
  const int64_t rows = a.heads + 2 * a.kv_heads;
  dim3 grid(unsigned(a.tokens), unsigned((rows + kWarps - 1) / kWarps));
  qk_rope_append_kernel<<<grid, 32 * kWarps, 0, static_cast<cudaStream_t>(stream)>>>(a);
  MILESRT_CUDA_CHECK(cudaGetLastError());
}

void silu_mul_cuda(const void* gate_up, void* out, int64_t rows, int64_t inter, void* stream) {
  if (rows * inter == 0) return;
  const int64_t n = rows * inter;
  const unsigned blocks = unsigned(std::min<int64_t>((n + 255) / 256, 65535));
  silu_mul_kernel<<<blocks, 256, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const uint16_t*>(gate_up), static_cast<uint16_t*>(out), rows, inter);
  MILESRT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace milesrt::kernels
