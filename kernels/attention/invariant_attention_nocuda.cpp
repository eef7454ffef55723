// Builds without CUDA: the batch-invariant attention is absent (its host reference remains).
#include <stdexcept>

#include "kernels/attention/invariant_attention.hpp"

namespace milesrt::kernels {
void invariant_attention_cuda(const invariant_attention_args&, void*) {
  throw std::runtime_error("invariant attention: built without CUDA kernels");
}
}  // namespace milesrt::kernels
