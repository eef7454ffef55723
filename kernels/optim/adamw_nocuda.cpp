// Builds without CUDA: the one-pass AdamW kernel is absent (the CPU reference remains).
#include <stdexcept>

#include "kernels/optim/adamw.hpp"

namespace milesrt::kernels {
void adamw_step_cuda(const adamw_args&, void*) {
  throw std::runtime_error("adamw: built without CUDA kernels");
}
}  // namespace milesrt::kernels
