// Builds without CUDA: the training kernels are absent (the CPU references remain).
#include <stdexcept>

#include "kernels/train/train_kernels.hpp"

namespace milesrt::kernels {
namespace {
[[noreturn]] void absent() {
  throw std::runtime_error("training kernels: built without CUDA kernels");
}
}  // namespace
bool train_kernels_available() { return false; }
void rmsnorm_backward_cuda(const void*, const void*, const void*, const void*, void*, float*, void*,
                           int64_t, int64_t, float, float*, void*) {
  absent();
}
void rope_cuda(const void*, const void*, const void*, void*, int64_t, int64_t, int64_t, bool,
               void*) {
  absent();
}
void silu_mul_forward_cuda(const void*, const void*, void*, int64_t, void*) { absent(); }
void silu_mul_backward_cuda(const void*, const void*, const void*, void*, void*, int64_t, void*) {
  absent();
}
void qk_norm_rope_cuda(const void*, const void*, const void*, const void*, void*, int64_t, int64_t,
                       float, void*) {
  absent();
}
void qk_norm_rope_backward_cuda(const void*, const void*, const void*, const void*, const void*,
                                void*, float*, void*, int64_t, int64_t, float, float*, void*) {
  absent();
}
void logprob_backward_cuda(void*, int64_t, int64_t, int64_t, const int64_t*, const float*,
                           const float*, const float*, const float*, float, void*) {
  absent();
}
}  // namespace milesrt::kernels
