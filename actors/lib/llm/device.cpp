#include "actors/lib/llm/device.hpp"

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/version.h>

#include <stdexcept>

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

c10::Device to_device(schema::Device device) {
  switch (device) {
    case schema::Device::CPU: return c10::Device(c10::kCPU);
    case schema::Device::CUDA: return c10::Device(c10::kCUDA);
  }
  throw std::invalid_argument("device: unknown enumerant " + std::to_string(static_cast<int>(device)));
}

c10::ScalarType to_dtype(schema::Dtype dtype) {
  switch (dtype) {
    case schema::Dtype::FP32: return c10::kFloat;
    case schema::Dtype::BF16: return c10::kBFloat16;
  }
  throw std::invalid_argument("dtype: unknown enumerant " + std::to_string(static_cast<int>(dtype)));
}

}  // namespace milesrt::llm
