// Builds without CUDA: the fused decoder kernels are absent (the CPU references remain).
#include <stdexcept>

#include "kernels/decoder/decoder_kernels.hpp"

namespace milesrt::kernels {
namespace {
[[noreturn]] void absent() {
  throw std::runtime_error("decoder kernels: built without CUDA kernels");
}
}  // namespace
void add_rmsnorm_cuda(void*, const void*, const void*, void*, int64_t, int64_t, float, void*) {
  absent();
}
void add_rmsnorm_out_cuda(const void*, const void*, void*, const void*, void*, int64_t, int64_t,
                          float, void*) {
  absent();
}
void qk_rope_append_cuda(const qk_rope_args&, void*) { absent(); }
void silu_mul_cuda(const void*, void*, int64_t, int64_t, void*) { absent(); }
}  // namespace milesrt::kernels
