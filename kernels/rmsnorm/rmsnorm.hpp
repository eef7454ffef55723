#pragma once
/// RMSNorm, the normalisation of Qwen/Llama decoders:
///   y[r, c] = x[r, c] * w[c] / sqrt(mean_c(x[r, c]^2) + eps)
/// One row = one token. The sum of squares is accumulated in fp32, left to right over c in the
/// CPU reference; the CUDA kernel reduces in a fixed tree order (per block, independent of the
/// number of rows), so its result for a row never depends on the batch it came in.

#include <cstdint>

namespace milesrt::kernels {

/// CPU reference, fp32, row-major [rows, cols].
void rmsnorm_cpu(const float* x, const float* w, float* y, int64_t rows, int64_t cols, float eps);

/// CUDA version on device pointers, launched on `stream` (a cudaStream_t; null = default stream).
/// Throws std::runtime_error naming the CUDA error when a launch fails, or when the build has no
/// CUDA kernels.
void rmsnorm_cuda(const float* x, const float* w, float* y, int64_t rows, int64_t cols, float eps,
                  void* stream);

}  // namespace milesrt::kernels
