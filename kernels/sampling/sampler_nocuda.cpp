// Builds without CUDA: the device sampler is absent.
#include <stdexcept>

#include "kernels/sampling/sampler.hpp"

namespace milesrt::kernels {
size_t sample_rows_workspace_bytes(int64_t, int64_t) { return 0; }
void sample_rows_cuda(const sample_rows_args&, void*) {
  throw std::runtime_error("sampler: built without CUDA kernels");
}
void score_rows_cuda(const score_rows_args&, void*) {
  throw std::runtime_error("score_rows: built without CUDA kernels");
}
}  // namespace milesrt::kernels
