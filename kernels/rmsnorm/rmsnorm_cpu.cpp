#include <cmath>
#include <stdexcept>

#include "kernels/rmsnorm/rmsnorm.hpp"

namespace milesrt::kernels {

void rmsnorm_cpu(const float* x, const float* w, float* y, int64_t rows, int64_t cols, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float sum = 0.f;
    for (int64_t c = 0; c < cols; ++c) sum += xr[c] * xr[c];
    const float inv = 1.f / std::sqrt(sum / static_cast<float>(cols) + eps);
    for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * inv * w[c];
  }
}

#ifndef MILESRT_HAVE_CUDA
void rmsnorm_cuda(const float*, const float*, float*, int64_t, int64_t, float, void*) {
  throw std::runtime_error("rmsnorm_cuda: this milesrt build has no CUDA kernels");
}
#endif

}  // namespace milesrt::kernels
