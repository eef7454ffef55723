// The one-pass AdamW step (adamw.hpp) on the GPU: a grid-stride loop, four elements a thread.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "kernels/cuda_check.cuh"
#include "kernels/decoder/bf16.hpp"
#include "kernels/optim/adamw.hpp"

namespace milesrt::kernels {
namespace {

// Correctly rounded fp32 division and square root (as the CPU reference's), computed in fp64 and
// rounded once: for fp32 operands the result is the same bits as __fdiv_rn / __fsqrt_rn (double
// rounding is innocuous for division and square root when 53 >= 2 * 24 + 2), and fp32 operands,
// subnormal ones included, are far from fp64's own subnormal range, so tiny moments do not send a
// warp down the fp32 intrinsics' slow subroutines. Zeros, which fp64 would still treat apart, take
// the select. `b` > 0 (the callers' denominators). Alone on an H100 the step over 1.72e9
// parameters takes 18.2 ms, libtorch's fused AdamW 21.2 ms (docs/benchmarks/2026-12-05.md).
__device__ __forceinline__ float div_rn(float a, float b) {
  const double q = __ddiv_rn(a == 0.f ? 1.0 : double(a), double(b));
  return a == 0.f ? a : __double2float_rn(q);  // 0 / b keeps a's sign
}
__device__ __forceinline__ float sqrt_rn(float v) {
  const double r = __dsqrt_rn(v == 0.f ? 1.0 : double(v));
  return v == 0.f ? v : __double2float_rn(r);  // sqrt(+-0) = +-0
}

__device__ __forceinline__ void update(const adamw_args& a, float coef, float decay, int64_t i,
                                       float g) {
  g *= coef;
  const float m0 = a.exp_avg[i];
  float p = __fmul_rn(a.master[i], decay);
  const float m = __fadd_rn(m0, __fmul_rn(1.f - a.beta1, __fsub_rn(g, m0)));
  const float v =
      __fadd_rn(__fmul_rn(a.beta2, a.exp_avg_sq[i]), __fmul_rn(__fmul_rn(1.f - a.beta2, g), g));
  const float denom = __fadd_rn(div_rn(sqrt_rn(v), a.bc2_sqrt), a.eps);
  p = __fsub_rn(p, __fmul_rn(a.step_size, div_rn(m, denom)));
  a.master[i] = p;
  a.exp_avg[i] = m;
  a.exp_avg_sq[i] = v;
  const uint16_t w = float_to_bf16_bits(p);
  if (a.weights_bf16 != nullptr) a.weights_bf16[i] = w;
  if (a.nonfinite != nullptr &&
      (a.weights_bf16 != nullptr ? (w & 0x7f80u) == 0x7f80u : !isfinite(p)))
    *a.nonfinite = 1;
}

__device__ __forceinline__ float load_grad(const adamw_args& a, int64_t i) {
  if (a.grad_bf16) {
    auto* gp = static_cast<uint16_t*>(a.grad);
    const float g = bf16_bits_to_float(gp[i]);
    if (a.zero_grad) gp[i] = 0;
    return g;
  }
  auto* gp = static_cast<float*>(a.grad);
  const float g = gp[i];
  if (a.zero_grad) gp[i] = 0.f;
  return g;
}

constexpr int64_t kChunkQuads = 16384;  // 65,536 elements a block

// Four consecutive elements a thread per iteration (all buffers are 16-byte aligned: checked by
// the caller). Every load of an iteration is issued before any store: the gradient's zeroing is
// written with the results, not after its load (a store to the address of a load still in flight,
// followed by loads the compiler may not hoist above it, halved the loads in flight: the step took
// 36 ms instead of 12 on an H200 with zeroing on; docs/benchmarks/2026-12-05.md).
__global__ void adamw_kernel(adamw_args a) {
  const float coef = a.grad_coef != nullptr ? *a.grad_coef : 1.f;
  const float decay = 1.f - a.lr * a.weight_decay;
  const int64_t quads = a.n / 4;
  float* __restrict__ master = a.master;
  float* __restrict__ exp_avg = a.exp_avg;
  float* __restrict__ exp_avg_sq = a.exp_avg_sq;
  bool bad = false;  // a written weight is not finite
  // Each block walks its own contiguous chunk (as libtorch's multi-tensor kernels do).
  const int64_t begin = int64_t(blockIdx.x) * kChunkQuads, end = min(quads, begin + kChunkQuads);
  for (int64_t q = begin + threadIdx.x; q < end; q += blockDim.x) {
    const int64_t i = 4 * q;
    float g[4];
    if (a.grad_bf16) {
      const uint2 raw = *reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(a.grad) + i);
      const uint16_t* h = reinterpret_cast<const uint16_t*>(&raw);
      for (int k = 0; k < 4; ++k) g[k] = bf16_bits_to_float(h[k]);
    } else {
      const float4 raw = *reinterpret_cast<const float4*>(static_cast<const float*>(a.grad) + i);
      g[0] = raw.x;
      g[1] = raw.y;
      g[2] = raw.z;
      g[3] = raw.w;
    }
    float4 p = *reinterpret_cast<const float4*>(master + i);
    float4 m = *reinterpret_cast<const float4*>(exp_avg + i);
    float4 v = *reinterpret_cast<const float4*>(exp_avg_sq + i);
    float* pp = &p.x;
    float* mp = &m.x;
    float* vp = &v.x;
    uint16_t w[4];
    for (int k = 0; k < 4; ++k) {
      const float gk = g[k] * coef;
      const float m0 = mp[k];
      float pk = __fmul_rn(pp[k], decay);
      const float mk = __fadd_rn(m0, __fmul_rn(1.f - a.beta1, __fsub_rn(gk, m0)));
      const float vk =
          __fadd_rn(__fmul_rn(a.beta2, vp[k]), __fmul_rn(__fmul_rn(1.f - a.beta2, gk), gk));
      const float denom = __fadd_rn(div_rn(sqrt_rn(vk), a.bc2_sqrt), a.eps);
      pk = __fsub_rn(pk, __fmul_rn(a.step_size, div_rn(mk, denom)));
      pp[k] = pk;
      mp[k] = mk;
      vp[k] = vk;
      w[k] = float_to_bf16_bits(pk);
      bad |= a.weights_bf16 != nullptr ? (w[k] & 0x7f80u) == 0x7f80u : !isfinite(pk);
    }
    *reinterpret_cast<float4*>(master + i) = p;
    *reinterpret_cast<float4*>(exp_avg + i) = m;
    *reinterpret_cast<float4*>(exp_avg_sq + i) = v;
    if (a.weights_bf16 != nullptr) {
      *reinterpret_cast<uint2*>(a.weights_bf16 + i) = make_uint2(
          uint32_t(w[0]) | (uint32_t(w[1]) << 16), uint32_t(w[2]) | (uint32_t(w[3]) << 16));
    }
    if (a.zero_grad) {
      if (a.grad_bf16)
        *reinterpret_cast<uint2*>(static_cast<uint16_t*>(a.grad) + i) = make_uint2(0u, 0u);
      else
        *reinterpret_cast<float4*>(static_cast<float*>(a.grad) + i) =
            make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
  if (bad && a.nonfinite != nullptr) *a.nonfinite = 1;
  // The last n % 4 elements.
  if (blockIdx.x == 0 && threadIdx.x < a.n % 4) {
    const int64_t i = 4 * quads + threadIdx.x;
    update(a, coef, decay, i, load_grad(a, i));
  }
}

}  // namespace

void adamw_step_cuda(const adamw_args& a, void* stream) {
  if (a.n == 0) return;
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (!aligned(a.master) || !aligned(a.exp_avg) || !aligned(a.exp_avg_sq) || !aligned(a.grad) ||
      (a.weights_bf16 != nullptr && !aligned(a.weights_bf16))) {
    throw std::invalid_argument("adamw_step_cuda: every buffer must be 16-byte aligned");
  }
  const int64_t blocks = std::max<int64_t>(1, (a.n / 4 + kChunkQuads - 1) / kChunkQuads);
  if (blocks > int64_t{INT32_MAX})
    throw std::invalid_argument("adamw_step_cuda: too many elements");
  adamw_kernel<<<unsigned(blocks), 256, 0, static_cast<cudaStream_t>(stream)>>>(a);
  MILESRT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace milesrt::kernels
