#include "kernels/cuda_check.cuh"
#include "kernels/rmsnorm/rmsnorm.hpp"

namespace milesrt::kernels {
namespace {

constexpr int kThreads = 256;

// One block per row. Each thread sums a strided slice; the block then reduces in a fixed tree,
// so the order of additions depends only on `cols`, never on how many rows were launched.
__global__ void rmsnorm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                               float* __restrict__ y, int64_t cols, float eps) {
  __shared__ float partial[kThreads];
  const int64_t row = blockIdx.x;
  const float* xr = x + row * cols;
  float* yr = y + row * cols;
  float sum = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) sum += xr[c] * xr[c];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  const float inv = rsqrtf(partial[0] / static_cast<float>(cols) + eps);
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) yr[c] = xr[c] * inv * w[c];
}

}  // namespace

void rmsnorm_cuda(const float* x, const float* w, float* y, int64_t rows, int64_t cols, float eps,
                  void* stream) {
  if (rows == 0 || cols == 0) return;
  rmsnorm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      x, w, y, cols, eps);
  MILESRT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace milesrt::kernels
