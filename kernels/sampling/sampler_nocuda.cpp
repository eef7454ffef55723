// Builds without CUDA: the device sampler is absent.
#include <stdexcept>

#include "kernels/sampling/sampler.hpp"

namespace milesrt::kernels {
void sample_rows_cuda(const sample_rows_args&, void*) {
  throw std::runtime_error("sampler: built without CUDA kernels");
}
}  // namespace milesrt::kernels
