// The batched sampler (see sampler.hpp): one block of 1024 threads per row, one pass over the row.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <stdexcept>
#include <string>

#include "kernels/sampling/philox.hpp"
#include "kernels/sampling/sampler.hpp"

namespace milesrt::kernels {
namespace {

constexpr int kThreads = 1024;

/// Running state of one thread (or a merged group): the max m of z seen, s = sum exp(z - m),
/// t = sum exp(z - m) * z over the full row; and the best (z + g) over kept tokens.
struct row_state {
  float m;
  float s;
  float t;
  double best;
  int64_t best_i;
  float best_z;
};

__device__ __forceinline__ void merge(row_state& a, const row_state& b) {
  const float m = fmaxf(a.m, b.m);
  const float ea = a.m == -FLT_MAX ? 0.f : expf(a.m - m);
  const float eb = b.m == -FLT_MAX ? 0.f : expf(b.m - m);
  a.s = a.s * ea + b.s * eb;
  a.t = a.t * ea + b.t * eb;
  a.m = m;
  if (b.best > a.best || (b.best == a.best && b.best_i < a.best_i)) {
    a.best = b.best;
    a.best_i = b.best_i;
    a.best_z = b.best_z;
  }
}

__device__ __forceinline__ row_state shuffle_down(const row_state& x, int offset) {
  row_state y;
  y.m = __shfl_down_sync(0xffffffffu, x.m, offset);
  y.s = __shfl_down_sync(0xffffffffu, x.s, offset);
  y.t = __shfl_down_sync(0xffffffffu, x.t, offset);
  y.best = __shfl_down_sync(0xffffffffu, x.best, offset);
  y.best_i = __shfl_down_sync(0xffffffffu, x.best_i, offset);
  y.best_z = __shfl_down_sync(0xffffffffu, x.best_z, offset);
  return y;
}

template <typename T>
__device__ __forceinline__ float load(const T* p);
template <>
__device__ __forceinline__ float load<float>(const float* p) { return *p; }
template <>
__device__ __forceinline__ float load<__nv_bfloat16>(const __nv_bfloat16* p) {
  return __bfloat162float(*p);
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    sample_kernel(const T* logits, int64_t vocab, int64_t ld, const float* temperature,
                  const float* min_kept, const uint64_t* seed, const int64_t* position,
                  int64_t* token, float* logprob, float* entropy) {
  const int64_t r = blockIdx.x;
  const T* row = logits + r * ld;
  const float temp = temperature[r];
  const float floor = min_kept != nullptr ? min_kept[r] : -FLT_MAX;
  const uint64_t key = seed[r];
  const int64_t pos = position[r];
  row_state st{-FLT_MAX, 0.f, 0.f, -DBL_MAX, 0, 0.f};
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
    const float z = __fdiv_rn(load(row + i), temp);
    if (z > st.m) {
      const float e = st.m == -FLT_MAX ? 0.f : expf(st.m - z);
      st.s = st.s * e + 1.f;
      st.t = st.t * e + z;
      st.m = z;
    } else {
      const float e = expf(z - st.m);
      st.s += e;
      st.t += e * z;
    }
    if (z >= floor) {
      const double v = double(z) - log(-log(philox_uniform(key, pos, i)));
      if (v > st.best) {  // i grows within a thread: ties keep the smaller id
        st.best = v;
        st.best_i = i;
        st.best_z = z;
      }
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    row_state o = shuffle_down(st, offset);
    merge(st, o);
  }
  __shared__ row_state warp_states[kThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_states[warp] = st;
  __syncthreads();
  if (warp == 0) {
    st = warp_states[lane];
    for (int offset = 16; offset > 0; offset /= 2) {
      row_state o = shuffle_down(st, offset);
      merge(st, o);
    }
    if (lane == 0) {
      const float lse = st.m + logf(st.s);
      token[r] = st.best_i;
      logprob[r] = st.best_z - lse;
      if (entropy != nullptr) entropy[r] = lse - st.t / st.s;
    }
  }
}

}  // namespace

void sample_rows_cuda(const sample_rows_args& a, void* stream) {
  if (a.rows == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  if (a.bf16) {
    sample_kernel<__nv_bfloat16><<<unsigned(a.rows), kThreads, 0, s>>>(
        static_cast<const __nv_bfloat16*>(a.logits), a.vocab, a.ld, a.temperature, a.min_kept,
        a.seed, a.position, a.token, a.logprob, a.entropy);
  } else {
    sample_kernel<float><<<unsigned(a.rows), kThreads, 0, s>>>(
        static_cast<const float*>(a.logits), a.vocab, a.ld, a.temperature, a.min_kept, a.seed,
        a.position, a.token, a.logprob, a.entropy);
  }
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw std::runtime_error(std::string("sampler: ") + cudaGetErrorString(e));
}

}  // namespace milesrt::kernels
