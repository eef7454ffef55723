// The training kernels (train_kernels.hpp) on the GPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>

#include "kernels/cuda_check.cuh"
#include "kernels/decoder/bf16.hpp"
#include "kernels/train/train_kernels.hpp"
#include "kernels/warp_reduce.cuh"

namespace milesrt::kernels {
namespace {

constexpr int kMaxColsPerThread = 32;  // cols up to 8192 with 256 threads

/// The sum of v over the block (every thread gets it); `scratch` holds one float per warp.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  v = warp_sum(v);
  const int warps = blockDim.x / 32;
  __syncthreads();  // scratch may still be read from the previous call
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0.f;
  for (int i = 0; i < warps; ++i) total += scratch[i];
  return total;
}

// A block takes per_block consecutive rows; each thread owns columns c = tid + k * blockDim
// and keeps their dw partial sums in registers; the block's partials go to the workspace.
__global__ void rmsnorm_backward_kernel(const uint16_t* __restrict__ dy,
                                        const uint16_t* __restrict__ x,
                                        const uint16_t* __restrict__ w,
                                        const uint16_t* __restrict__ dres,
                                        uint16_t* __restrict__ dx, float* __restrict__ partial,
                                        int64_t rows, int64_t cols, float eps, int64_t per_block) {
  __shared__ float scratch[32];
  float acc[kMaxColsPerThread];
  const int per = int((cols + blockDim.x - 1) / blockDim.x);
  for (int k = 0; k < per; ++k) acc[k] = 0.f;
  const int64_t first = int64_t(blockIdx.x) * per_block;
  const int64_t last = min(rows, first + per_block);
  for (int64_t r = first; r < last; ++r) {
    const uint16_t* xr = x + r * cols;
    const uint16_t* gr = dy + r * cols;
    float ss = 0.f;
    for (int k = 0; k < per; ++k) {
      const int64_t c = threadIdx.x + int64_t(k) * blockDim.x;
      if (c < cols) {
        const float v = bf16_bits_to_float(xr[c]);
        ss += v * v;
      }
    }
    const float rstd = rsqrtf(block_sum(ss, scratch) / float(cols) + eps);
    float dot = 0.f;
    for (int k = 0; k < per; ++k) {
      const int64_t c = threadIdx.x + int64_t(k) * blockDim.x;
      if (c < cols)
        dot += bf16_bits_to_float(gr[c]) * bf16_bits_to_float(w[c]) *
               (bf16_bits_to_float(xr[c]) * rstd);
    }
    const float mean = block_sum(dot, scratch) / float(cols);
    for (int k = 0; k < per; ++k) {
      const int64_t c = threadIdx.x + int64_t(k) * blockDim.x;
      if (c < cols) {
        const float n = bf16_bits_to_float(xr[c]) * rstd;
        const float g = bf16_bits_to_float(gr[c]);
        float d = rstd * (g * bf16_bits_to_float(w[c]) - n * mean);
        if (dres != nullptr) d += bf16_bits_to_float(dres[r * cols + c]);
        dx[r * cols + c] = float_to_bf16_bits(d);
        acc[k] += g * round_bf16(n);
      }
    }
  }
  for (int k = 0; k < per; ++k) {
    const int64_t c = threadIdx.x + int64_t(k) * blockDim.x;
    if (c < cols) partial[int64_t(blockIdx.x) * cols + c] = acc[k];
  }
}

// dw[c] = the blocks' partial sums in a fixed order: a block takes 32 columns; its 8 warps' lane c
// sums every 8th partial row (j, j + 8, ...), then warp 0 adds the 8 sums in order. With `acc`,
// the sum is added to that bf16 gradient instead (acc[c] = bf16(acc[c] + dw[c])).
__global__ void sum_partials_kernel(const float* __restrict__ partial, float* __restrict__ dw,
                                    uint16_t* __restrict__ acc, int64_t blocks, int64_t cols) {
  __shared__ float sums[8][32];
  const int lane = threadIdx.x % 32, j = threadIdx.x / 32;
  const int64_t c = int64_t(blockIdx.x) * 32 + lane;
  float s = 0.f;
  if (c < cols)
    for (int64_t b = j; b < blocks; b += 8) s += partial[b * cols + c];
  sums[j][lane] = s;
  __syncthreads();
  if (j == 0 && c < cols) {
    float t = 0.f;
    for (int k = 0; k < 8; ++k) t += sums[k][lane];
    if (acc != nullptr)
      acc[c] = float_to_bf16_bits(bf16_bits_to_float(acc[c]) + t);
    else
      dw[c] = t;
  }
}

// One thread per (row, head, i < d/2) pair: elements i and i + d/2.
__global__ void rope_kernel(const uint16_t* __restrict__ x, const uint16_t* __restrict__ cos,
                            const uint16_t* __restrict__ sin, uint16_t* __restrict__ out,
                            int64_t rows, int64_t heads, int64_t d, bool backward) {
  const int64_t half = d / 2;
  const int64_t n = rows * heads * half;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = k % half, rh = k / half, r = rh / heads;
    const uint16_t* xi = x + rh * d;
    uint16_t* o = out + rh * d;
    const float a = bf16_bits_to_float(xi[i]), b = bf16_bits_to_float(xi[i + half]);
    const float c1 = bf16_bits_to_float(cos[r * d + i]),
                c2 = bf16_bits_to_float(cos[r * d + i + half]);
    const float s1 = bf16_bits_to_float(sin[r * d + i]),
                s2 = bf16_bits_to_float(sin[r * d + i + half]);
    if (backward) {
      o[i] = float_to_bf16_bits(a * c1 + b * s2);
      o[i + half] = float_to_bf16_bits(b * c2 - a * s1);
    } else {
      o[i] = float_to_bf16_bits(round_bf16(a * c1) + round_bf16(-b * s1));
      o[i + half] = float_to_bf16_bits(round_bf16(b * c2) + round_bf16(a * s2));
    }
  }
}

// Four elements a thread (8-byte loads) where the buffers allow it, one at a time for the rest.
__device__ __forceinline__ void silu_mul_one(const uint16_t* gate, const uint16_t* up,
                                             uint16_t* out, int64_t k) {
  const float g = bf16_bits_to_float(gate[k]);
  out[k] = float_to_bf16_bits(round_bf16(g / (1.0f + expf(-g))) * bf16_bits_to_float(up[k]));
}

__device__ __forceinline__ void silu_mul_grad_one(const uint16_t* dout, const uint16_t* gate,
                                                  const uint16_t* up, uint16_t* dgate,
                                                  uint16_t* dup, int64_t k) {
  const float g = bf16_bits_to_float(gate[k]), u = bf16_bits_to_float(up[k]);
  const float d = bf16_bits_to_float(dout[k]);
  const float s = 1.0f / (1.0f + expf(-g));
  dup[k] = float_to_bf16_bits(d * round_bf16(g * s));
  dgate[k] = float_to_bf16_bits(d * u * (s * (1.0f + g * (1.0f - s))));
}

__device__ __forceinline__ void load4(const uint16_t* p, int64_t k, uint16_t (&v)[4]) {
  const uint2 raw = *reinterpret_cast<const uint2*>(p + k);
  v[0] = uint16_t(raw.x & 0xffffu);
  v[1] = uint16_t(raw.x >> 16);
  v[2] = uint16_t(raw.y & 0xffffu);
  v[3] = uint16_t(raw.y >> 16);
}

__device__ __forceinline__ void store4(uint16_t* p, int64_t k, const uint16_t (&v)[4]) {
  *reinterpret_cast<uint2*>(p + k) =
      make_uint2(uint32_t(v[0]) | (uint32_t(v[1]) << 16), uint32_t(v[2]) | (uint32_t(v[3]) << 16));
}

__global__ void silu_mul_forward_kernel(const uint16_t* __restrict__ gate,
                                        const uint16_t* __restrict__ up, uint16_t* __restrict__ out,
                                        int64_t n, bool vec) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (!vec) {
    for (int64_t k = first; k < n; k += stride) silu_mul_one(gate, up, out, k);
    return;
  }
  for (int64_t q = first; q < n / 4; q += stride) {
    uint16_t g[4], u[4], o[4];
    load4(gate, 4 * q, g);
    load4(up, 4 * q, u);
    for (int i = 0; i < 4; ++i) {
      const float gf = bf16_bits_to_float(g[i]);
      o[i] = float_to_bf16_bits(round_bf16(gf / (1.0f + expf(-gf))) * bf16_bits_to_float(u[i]));
    }
    store4(out, 4 * q, o);
  }
  if (first < n % 4) silu_mul_one(gate, up, out, n / 4 * 4 + first);
}

__global__ void silu_mul_backward_kernel(const uint16_t* __restrict__ dout,
                                         const uint16_t* __restrict__ gate,
                                         const uint16_t* __restrict__ up,
                                         uint16_t* __restrict__ dgate, uint16_t* __restrict__ dup,
                                         int64_t n, bool vec) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (!vec) {
    for (int64_t k = first; k < n; k += stride) silu_mul_grad_one(dout, gate, up, dgate, dup, k);
    return;
  }
  for (int64_t q = first; q < n / 4; q += stride) {
    uint16_t d[4], g[4], u[4], dg[4], du[4];
    load4(dout, 4 * q, d);
    load4(gate, 4 * q, g);
    load4(up, 4 * q, u);
    for (int i = 0; i < 4; ++i) {
      const float gf = bf16_bits_to_float(g[i]), uf = bf16_bits_to_float(u[i]),
                  df = bf16_bits_to_float(d[i]);
      const float s = 1.0f / (1.0f + expf(-gf));
      du[i] = float_to_bf16_bits(df * round_bf16(gf * s));
      dg[i] = float_to_bf16_bits(df * uf * (s * (1.0f + gf * (1.0f - s))));
    }
    store4(dgate, 4 * q, dg);
    store4(dup, 4 * q, du);
  }
  if (first < n % 4) silu_mul_grad_one(dout, gate, up, dgate, dup, n / 4 * 4 + first);
}

constexpr int kHead = 128;  // qk_norm_rope's head size: 4 elements a lane

// One warp a (row, head), as qk_rope_append_kernel (kernels/decoder) normalises and rotates.
__global__ void qk_norm_rope_kernel(const uint16_t* __restrict__ x, const uint16_t* __restrict__ w,
                                    const uint16_t* __restrict__ cos,
                                    const uint16_t* __restrict__ sin, uint16_t* __restrict__ out,
                                    int64_t rows, int64_t heads, float eps) {
  const int lane = threadIdx.x % 32;
  const int64_t rh = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (rh >= rows * heads) return;
  const int64_t t = rh / heads;
  uint16_t in[4];
  *reinterpret_cast<uint2*>(in) = *reinterpret_cast<const uint2*>(x + rh * kHead + 4 * lane);
  float y[4];
  for (int i = 0; i < 4; ++i) y[i] = bf16_bits_to_float(in[i]);
  float ss = y[0] * y[0] + y[1] * y[1] + y[2] * y[2] + y[3] * y[3];
  ss = warp_sum(ss);
  const float inv = rsqrtf(ss / float(kHead) + eps);
  for (int i = 0; i < 4; ++i)
    y[i] = round_bf16(bf16_bits_to_float(w[4 * lane + i]) * round_bf16(y[i] * inv));
  const uint16_t* cs = cos + t * kHead + 4 * lane;
  const uint16_t* sn = sin + t * kHead + 4 * lane;
  uint16_t o[4];
  for (int i = 0; i < 4; ++i) {
    const float partner = __shfl_xor_sync(0xffffffffu, y[i], 16);
    const float rot = lane < 16 ? -partner : partner;
    o[i] = float_to_bf16_bits(round_bf16(y[i] * bf16_bits_to_float(cs[i])) +
                              round_bf16(rot * bf16_bits_to_float(sn[i])));
  }
  *reinterpret_cast<uint2*>(out + rh * kHead + 4 * lane) = *reinterpret_cast<const uint2*>(o);
}

// One warp a block, per_block consecutive head rows in order (rmsnorm_backward_kernel's blocks):
// rope's transposed rotation, then the norm's backward; lane l owns columns 4l..4l+3 and their dw
// partial sums.
__global__ void qk_norm_rope_backward_kernel(
    const uint16_t* __restrict__ dout, const uint16_t* __restrict__ x,
    const uint16_t* __restrict__ w, const uint16_t* __restrict__ cos,
    const uint16_t* __restrict__ sin, uint16_t* __restrict__ dx, float* __restrict__ partial,
    int64_t total, int64_t heads, float eps, int64_t per_block) {
  const int lane = threadIdx.x;
  float wv[4], acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int i = 0; i < 4; ++i) wv[i] = bf16_bits_to_float(w[4 * lane + i]);
  const int64_t first = int64_t(blockIdx.x) * per_block;
  const int64_t last = min(total, first + per_block);
  for (int64_t r = first; r < last; ++r) {
    const int64_t t = r / heads;
    uint16_t gb[4], xb[4], cb[4], sb[4];
    *reinterpret_cast<uint2*>(gb) = *reinterpret_cast<const uint2*>(dout + r * kHead + 4 * lane);
    *reinterpret_cast<uint2*>(xb) = *reinterpret_cast<const uint2*>(x + r * kHead + 4 * lane);
    *reinterpret_cast<uint2*>(cb) = *reinterpret_cast<const uint2*>(cos + t * kHead + 4 * lane);
    *reinterpret_cast<uint2*>(sb) = *reinterpret_cast<const uint2*>(sin + t * kHead + 4 * lane);
    float dy[4], xv[4];
    for (int i = 0; i < 4; ++i) {
      const float g = bf16_bits_to_float(gb[i]), s = bf16_bits_to_float(sb[i]);
      const float pg = __shfl_xor_sync(0xffffffffu, g, 16);  // element i -+ 64's gradient
      const float ps = __shfl_xor_sync(0xffffffffu, s, 16);  // and its sin
      const float c = bf16_bits_to_float(cb[i]);
      dy[i] = round_bf16(lane < 16 ? g * c + pg * ps : g * c - pg * ps);
      xv[i] = bf16_bits_to_float(xb[i]);
    }
    float ss = 0.f;
    for (int i = 0; i < 4; ++i) ss += xv[i] * xv[i];
    const float rstd = rsqrtf(warp_sum(ss) / float(kHead) + eps);
    float dot = 0.f;
    for (int i = 0; i < 4; ++i) dot += dy[i] * wv[i] * (xv[i] * rstd);
    const float mean = warp_sum(dot) / float(kHead);
    uint16_t o[4];
    for (int i = 0; i < 4; ++i) {
      const float n = xv[i] * rstd;
      o[i] = float_to_bf16_bits(rstd * (dy[i] * wv[i] - n * mean));
      acc[i] += dy[i] * round_bf16(n);
    }
    *reinterpret_cast<uint2*>(dx + r * kHead + 4 * lane) = *reinterpret_cast<const uint2*>(o);
  }
  for (int i = 0; i < 4; ++i) partial[int64_t(blockIdx.x) * kHead + 4 * lane + i] = acc[i];
}

__device__ __forceinline__ float logprob_grad_one(float x, float temp, float lse, float h,
                                                  float glp, float gent, bool is_target) {
  const float z = __fdiv_rn(x, temp);
  const float p = expf(z - lse);
  float g = -(((z - lse) + h) * gent + glp) * p;
  if (is_target) g += glp;
  return __fdiv_rn(g, temp);
}

// Block (column chunk, row): 8 elements a thread with 16-byte loads where the row allows it.
__global__ void logprob_backward_kernel(uint16_t* __restrict__ logits, int64_t vocab, int64_t ld,
                                        const int64_t* __restrict__ target,
                                        const float* __restrict__ lse,
                                        const float* __restrict__ entropy,
                                        const float* __restrict__ g_lp,
                                        const float* __restrict__ g_ent, float temp, bool vec) {
  const int64_t r = blockIdx.y;
  uint16_t* row = logits + r * ld;
  const float l = lse[r], h = entropy[r], glp = g_lp[r], gent = g_ent[r];
  const int64_t t = target[r];
  const int64_t first = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
  if (first >= vocab) return;
  if (vec && first + 8 <= vocab) {
    uint4 raw = *reinterpret_cast<const uint4*>(row + first);
    uint32_t* w = reinterpret_cast<uint32_t*>(&raw);
    for (int i = 0; i < 4; ++i) {
      const int64_t j = first + 2 * i;
      const float a = logprob_grad_one(bf16_bits_to_float(uint16_t(w[i] & 0xffffu)), temp, l, h,
                                       glp, gent, j == t);
      const float b = logprob_grad_one(bf16_bits_to_float(uint16_t(w[i] >> 16)), temp, l, h, glp,
                                       gent, j + 1 == t);
      w[i] = uint32_t(float_to_bf16_bits(a)) | (uint32_t(float_to_bf16_bits(b)) << 16);
    }
    *reinterpret_cast<uint4*>(row + first) = raw;
    return;
  }
  for (int64_t j = first; j < first + 8 && j < vocab; ++j)
    row[j] = float_to_bf16_bits(
        logprob_grad_one(bf16_bits_to_float(row[j]), temp, l, h, glp, gent, j == t));
}

bool aligned8(std::initializer_list<const void*> ps) {
  for (const void* p : ps)
    if (reinterpret_cast<uintptr_t>(p) % 8 != 0) return false;
  return true;
}

unsigned grid_for(int64_t n) {
  return unsigned(std::max<int64_t>(1, std::min<int64_t>((n + 255) / 256, 65535)));
}

}  // namespace

bool train_kernels_available() { return true; }

void rmsnorm_backward_cuda(const void* dy, const void* x, const void* w, const void* dres, void* dx,
                           float* dw, void* dw_acc, int64_t rows, int64_t cols, float eps,
                           float* workspace, void* stream) {
  if (cols == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  const int threads = int(std::min<int64_t>(256, (cols + 31) / 32 * 32));
  if ((cols + threads - 1) / threads > kMaxColsPerThread) {
    throw std::invalid_argument(
        "rmsnorm_backward_cuda: rows of more than 8192 columns are not supported");
  }
  const int64_t per_block = norm_rows_per_block(rows);
  const int64_t blocks = (rows + per_block - 1) / per_block;
  if (blocks > 0) {
    rmsnorm_backward_kernel<<<unsigned(blocks), threads, 0, s>>>(
        static_cast<const uint16_t*>(dy), static_cast<const uint16_t*>(x),
        static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(dres),
        static_cast<uint16_t*>(dx), workspace, rows, cols, eps, per_block);
    MILESRT_CUDA_CHECK(cudaGetLastError());
  }
  if (dw == nullptr && dw_acc == nullptr) return;
  sum_partials_kernel<<<unsigned((cols + 31) / 32), 256, 0, s>>>(
      workspace, dw, static_cast<uint16_t*>(dw_acc), blocks, cols);
  MILESRT_CUDA_CHECK(cudaGetLastError());
}

void qk_norm_rope_cuda(const void* x, const void* w, const void* cos, const void* sin, void* out,
                       int64_t rows, int64_t heads, float eps, void* stream) {
  const int64_t n = rows * heads;
  if (n == 0) return;
  constexpr int kWarps = 4;
  qk_norm_rope_kernel<<<unsigned((n + kWarps - 1) / kWarps), 32 * kWarps, 0,
                        static_cast<cudaStream_t>(stream)>>>(
      static_cast<const uint16_t*>(x), static_cast<const uint16_t*>(w),
      static_cast<const uint16_t*>(cos), static_cast<const uint16_t*>(sin),
      static_cast<uint16_t*>(out), rows, heads, eps);
  MILESRT_CUDA_CHECK(cudaGetLastError());
}

void qk_norm_rope_backward_cuda(const void* dout, const void* x, const void* w, const void* cos,
                                const void* sin, void* dx, float* dw, void* dw_acc, int64_t rows,
                                int64_t heads, float eps, float* workspace, void* stream) {
  const int64_t total = rows * heads;
  auto s = static_cast<cudaStream_t>(stream);
  const int64_t per_block = norm_rows_per_block(total);
  const int64_t blocks = (total + per_block - 1) / per_block;
  if (blocks > 0) {  // no rows: dw still gets its (zero) sums below
    qk_norm_rope_backward_kernel<<<unsigned(blocks), 32, 0, s>>>(
        static_cast<const uint16_t*>(dout), static_cast<const uint16_t*>(x),
        static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(cos),
        static_cast<const uint16_t*>(sin), static_cast<uint16_t*>(dx), workspace, total, heads, eps,
        per_block);
    MILESRT_CUDA_CHECK(cudaGetLastError());
  }
  if (dw == nullptr && dw_acc == nullptr) return;
  sum_partials_kernel<<<unsigned(kHead / 32), 256, 0, s>>>(
      workspace, dw, static_cast<uint16_t*>(dw_acc), blocks, kHead);
  MILESRT_CUDA_CHECK(cudaGetLastError());
}

void rope_cuda(const void* x, const void* cos, const void* sin, void* out, int64_t rows,
               int64_t heads, int64_t d, bool backward, void* stream) {
  const int64_t n = rows * heads * (d / 2);
  if (n == 0) return;
  rope_kernel<<<grid_for(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const uint16_t*>(x), static_cast<const uint16_t*>(cos),
      static_cast<const uint16_t*>(sin), static_cast<uint16_t*>(out), rows, heads, d, backward);
  MILESRT_CUDA_CHECK(cudaGetLastError());
}

void silu_mul_forward_cuda(const void* gate, const void* up, void* out, int64_t n, void* stream) {
  if (n == 0) return;
  const bool vec = aligned8({gate, up, out});
  silu_mul_forward_kernel<<<grid_for(vec ? n / 4 + 1 : n), 256, 0,
                            static_cast<cudaStream_t>(stream)>>>(
      static_cast<const uint16_t*>(gate), static_cast<const uint16_t*>(up),
      static_cast<uint16_t*>(out), n, vec);
  MILESRT_CUDA_CHECK(cudaGetLastError());
}

void silu_mul_backward_cuda(const void* dout, const void* gate, const void* up, void* dgate,
                            void* dup, int64_t n, void* stream) {
  if (n == 0) return;
  const bool vec = aligned8({dout, gate, up, dgate, dup});
  silu_mul_backward_kernel<<<grid_for(vec ? n / 4 + 1 : n), 256, 0,
                             static_cast<cudaStream_t>(stream)>>>(
      static_cast<const uint16_t*>(dout), static_cast<const uint16_t*>(gate),
      static_cast<const uint16_t*>(up), static_cast<uint16_t*>(dgate), static_cast<uint16_t*>(dup),
      n, vec);
  MILESRT_CUDA_CHECK(cudaGetLastError());
}

void logprob_backward_cuda(void* logits, int64_t rows, int64_t vocab, int64_t ld,
                           const int64_t* target, const float* lse, const float* entropy,
                           const float* g_lp, const float* g_ent, float temperature, void* stream) {
  if (rows == 0 || vocab == 0) return;
  if (rows > 65535) throw std::invalid_argument("logprob_backward_cuda: more than 65,535 rows");
  const bool vec = reinterpret_cast<uintptr_t>(logits) % 16 == 0 && ld % 8 == 0;
  const dim3 grid(unsigned((vocab + 8 * 256 - 1) / (8 * 256)), unsigned(rows));
  logprob_backward_kernel<<<grid, 256, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<uint16_t*>(logits), vocab, ld, target, lse, entropy, g_lp, g_ent, temperature,
      vec);
  MILESRT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace milesrt::kernels
