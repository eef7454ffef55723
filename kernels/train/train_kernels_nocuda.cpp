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
void rmsnorm_backward_cuda(const void*, const void*, const void*, void*, float*, int64_t, int64_t,
                           float, float*, void*) {
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
}  // namespace milesrt::kernels
