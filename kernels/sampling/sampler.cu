// The batched sampler (see sampler.hpp): each row cut into fixed slices, one block of 512 threads
// per (slice, row) in a first pass, the slices' states merged by one warp per row in a second.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <stdexcept>
#include <string>

#include "kernels/sampling/philox.hpp"
#include "kernels/sampling/sampler.hpp"

namespace milesrt::kernels {
namespace {

constexpr int kThreads = 512;
/// Vocabulary entries per block: 16 a thread. A row of Qwen3's 151,936 takes 19 blocks, so a
/// batch of one fills 19 SMs instead of one (one block per row took 0.32 ms there, ncu).
constexpr int64_t kSlice = 16 * kThreads;

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
__device__ __forceinline__ float load<float>(const float* p) {
  return *p;
}
template <>
__device__ __forceinline__ float load<__nv_bfloat16>(const __nv_bfloat16* p) {
  return __bfloat162float(*p);
}

/// The block's threads' states merged into thread 0's (the others' results are meaningless).
__device__ __forceinline__ row_state block_merge(row_state st) {
  for (int offset = 16; offset > 0; offset /= 2) merge(st, shuffle_down(st, offset));
  __shared__ row_state warp_states[kThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_states[warp] = st;
  __syncthreads();
  if (warp == 0) {
    st = lane < kThreads / 32 ? warp_states[lane] : row_state{-FLT_MAX, 0.f, 0.f, -DBL_MAX, 0, 0.f};
    for (int offset = 16; offset > 0; offset /= 2) merge(st, shuffle_down(st, offset));
  }
  return st;
}

/// Pass 1, block (split, row): the state of the row's vocabulary slice
/// [split * kSlice, (split + 1) * kSlice) into partial[row * splits + split]. The slices depend on
/// the vocabulary size only, never on the batch, so a row's result is the same in any batch.
/// kSample = false: scoring (score_rows), the same reduction without the draw.
template <typename T, bool kSample>
__global__ void __launch_bounds__(kThreads)
    sample_slice_kernel(const T* logits, int64_t vocab, int64_t ld, const float* temperature,
                        float score_temperature, const float* min_kept, const uint64_t* seed,
                        const int64_t* position, row_state* partial) {
  const int64_t r = blockIdx.y;
  const T* row = logits + r * ld;
  const float temp = kSample ? temperature[r] : score_temperature;
  const float floor = kSample && min_kept != nullptr ? min_kept[r] : -FLT_MAX;
  const uint64_t key = kSample ? seed[r] : 0;
  const int64_t pos = kSample ? position[r] : 0;
  const int64_t begin = int64_t(blockIdx.x) * kSlice;
  const int64_t end = begin + kSlice < vocab ? begin + kSlice : vocab;
  row_state st{-FLT_MAX, 0.f, 0.f, -DBL_MAX, 0, 0.f};
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
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
    if (kSample && z >= floor) {
      const double v = double(z) - log(-log(philox_uniform(key, pos, i)));
      if (v > st.best) {  // i grows within a thread: ties keep the smaller id
        st.best = v;
        st.best_i = i;
        st.best_z = z;
      }
    }
  }
  st = block_merge(st);
  if (threadIdx.x == 0) partial[r * gridDim.x + blockIdx.x] = st;
}

/// Pass 2, one warp per row: the slices' states merged in slice order, then the row's token,
/// log-prob and entropy.
__global__ void sample_merge_kernel(const row_state* partial, int64_t splits, int64_t* token,
                                    float* logprob, float* entropy) {
  const int64_t r = blockIdx.x;
  row_state st{-FLT_MAX, 0.f, 0.f, -DBL_MAX, 0, 0.f};
  for (int64_t k = threadIdx.x; k < splits; k += 32) merge(st, partial[r * splits + k]);
  for (int offset = 16; offset > 0; offset /= 2) merge(st, shuffle_down(st, offset));
  if (threadIdx.x == 0) {
    const float lse = st.m + logf(st.s);
    token[r] = st.best_i;
    logprob[r] = st.best_z - lse;
    if (entropy != nullptr) entropy[r] = lse - st.t / st.s;
  }
}

/// Scoring's pass 2: as sample_merge_kernel, with the given token's z in place of the drawn one.
template <typename T>
__global__ void score_merge_kernel(const row_state* partial, int64_t splits, const T* logits,
                                   int64_t vocab, int64_t ld, float temp, const int64_t* target,
                                   float* logprob, float* entropy, float* lse_out) {
  const int64_t r = blockIdx.x;
  row_state st{-FLT_MAX, 0.f, 0.f, -DBL_MAX, 0, 0.f};
  for (int64_t k = threadIdx.x; k < splits; k += 32) merge(st, partial[r * splits + k]);
  for (int offset = 16; offset > 0; offset /= 2) merge(st, shuffle_down(st, offset));
  if (threadIdx.x == 0) {
    const float lse = st.m + logf(st.s);
    const int64_t t = target[r];
    const float z = t >= 0 && t < vocab ? __fdiv_rn(load(logits + r * ld + t), temp)
                                        : __int_as_float(0x7fc00000);
    logprob[r] = z - lse;
    entropy[r] = lse - st.t / st.s;
    if (lse_out != nullptr) lse_out[r] = lse;
  }
}

template <typename T>
void score_rows_typed(const score_rows_args& a, cudaStream_t s) {
  const int64_t splits = (a.vocab + kSlice - 1) / kSlice;
  auto* partial = static_cast<row_state*>(a.workspace);
  const auto* logits = static_cast<const T*>(a.logits);
  sample_slice_kernel<T, false><<<dim3(unsigned(splits), unsigned(a.rows)), kThreads, 0, s>>>(
      logits, a.vocab, a.ld, nullptr, a.temperature, nullptr, nullptr, nullptr, partial);
  score_merge_kernel<T><<<unsigned(a.rows), 32, 0, s>>>(
      partial, splits, logits, a.vocab, a.ld, a.temperature, a.target, a.logprob, a.entropy, a.lse);
}

}  // namespace

void score_rows_cuda(const score_rows_args& a, void* stream) {
  if (a.rows == 0) return;
  if (a.workspace == nullptr) throw std::invalid_argument("score_rows: no workspace");
  if (a.rows > 65535) throw std::invalid_argument("score_rows: more than 65,535 rows at once");
  auto s = static_cast<cudaStream_t>(stream);
  if (a.bf16)
    score_rows_typed<__nv_bfloat16>(a, s);
  else
    score_rows_typed<float>(a, s);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("score_rows: ") + cudaGetErrorString(e));
}

size_t sample_rows_workspace_bytes(int64_t rows, int64_t vocab) {
  return size_t(rows) * size_t((vocab + kSlice - 1) / kSlice) * sizeof(row_state);
}

void sample_rows_cuda(const sample_rows_args& a, void* stream) {
  if (a.rows == 0) return;
  if (a.workspace == nullptr) throw std::invalid_argument("sampler: no workspace");
  auto s = static_cast<cudaStream_t>(stream);
  const int64_t splits = (a.vocab + kSlice - 1) / kSlice;
  auto* partial = static_cast<row_state*>(a.workspace);
  const dim3 grid(unsigned(splits), unsigned(a.rows));
  if (a.bf16) {
    sample_slice_kernel<__nv_bfloat16, true>
        <<<grid, kThreads, 0, s>>>(static_cast<const __nv_bfloat16*>(a.logits), a.vocab, a.ld,
                                   a.temperature, 0.f, a.min_kept, a.seed, a.position, partial);
  } else {
    sample_slice_kernel<float, true>
        <<<grid, kThreads, 0, s>>>(static_cast<const float*>(a.logits), a.vocab, a.ld,
                                   a.temperature, 0.f, a.min_kept, a.seed, a.position, partial);
  }
  sample_merge_kernel<<<unsigned(a.rows), 32, 0, s>>>(partial, splits, a.token, a.logprob,
                                                      a.entropy);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw std::runtime_error(std::string("sampler: ") + cudaGetErrorString(e));
}

}  // namespace milesrt::kernels
