#include "actors/lib/llm/device.hpp"

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/version.h>

namespace milesrt::llm {

std::string torch_summary() {
  std::string s = "libtorch " TORCH_VERSION;
  if (at::globalContext().hasCUDA()) {
    s += " (CUDA part linked, " + std::to_string(at::detail::getCUDAHooks().deviceCount()) + " CUDA device(s))";
  } else {
    s += " (CPU only here: no CUDA driver/GPU, or the CUDA part is not linked)";
  }
  return s;
}

}  // namespace milesrt::llm
