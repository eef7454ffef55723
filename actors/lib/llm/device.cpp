#include "actors/lib/llm/device.hpp"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/version.h>

#include <stdexcept>

#include "actors/lib/llm/invariant_ops.hpp"

#ifdef MILESRT_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace milesrt::llm {

std::string torch_summary() {
  std::string s = "libtorch " TORCH_VERSION;
  if (at::globalContext().hasCUDA()) {
    s += " (CUDA part linked, " + std::to_string(at::detail::getCUDAHooks().deviceCount()) +
         " CUDA device(s))";
  } else {
    s += " (CPU only here: no CUDA driver/GPU, or the CUDA part is not linked)";
  }
  return s;
}

void set_intra_op_threads(int n) {
  if (n < 1)
    throw std::invalid_argument("intra-op threads: " + std::to_string(n) + " (at least 1)");
  at::set_num_threads(n);
}

c10::Device to_device(schema::Device device) {
  switch (device) {
    case schema::Device::CPU:
      return c10::Device(c10::kCPU);
    case schema::Device::CUDA:
      return c10::Device(c10::kCUDA);
  }
  throw std::invalid_argument("device: unknown enumerant " +
                              std::to_string(static_cast<int>(device)));
}

c10::ScalarType to_dtype(schema::Dtype dtype) {
  switch (dtype) {
    case schema::Dtype::FP32:
      return c10::kFloat;
    case schema::Dtype::BF16:
      return c10::kBFloat16;
  }
  throw std::invalid_argument("dtype: unknown enumerant " +
                              std::to_string(static_cast<int>(dtype)));
}

#ifdef MILESRT_TORCH_CUDA
namespace {
c10::DeviceIndex cuda_index(const c10::Device& device) {
  return device.has_index() ? device.index() : c10::cuda::current_device();
}
}  // namespace
#endif

problem_list true_on_policy_problems(schema::Device device, schema::Dtype dtype, bool lora) {
  auto why = invariant_ops::problem(to_device(device), to_dtype(dtype), lora);
  if (why.empty()) return {};
  return {{"trueOnPolicy", why}};
}

void set_current_device(const c10::Device& device) {
#ifdef MILESRT_TORCH_CUDA
  if (device.is_cuda() && device.has_index()) c10::cuda::set_device(device.index());
#else
  TORCH_CHECK(!device.is_cuda(), "set_current_device: this build has no CUDA part");
#endif
}

void* current_cuda_stream() {
#ifdef MILESRT_TORCH_CUDA
  return at::cuda::getCurrentCUDAStream().stream();
#else
  return nullptr;
#endif
}

void reset_peak_memory(const c10::Device& device) {
#ifdef MILESRT_TORCH_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(cuda_index(device));
#else
  (void)device;
#endif
}

double peak_memory_gib(const c10::Device& device) {
#ifdef MILESRT_TORCH_CUDA
  if (!device.is_cuda()) return 0;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(cuda_index(device));
  const auto aggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  return static_cast<double>(stats.allocated_bytes[aggregate].peak) / double(1ull << 30);
#else
  (void)device;
  return 0;
#endif
}

double allocated_memory_gib(const c10::Device& device) {
#ifdef MILESRT_TORCH_CUDA
  if (!device.is_cuda()) return 0;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(cuda_index(device));
  const auto aggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  return static_cast<double>(stats.allocated_bytes[aggregate].current) / double(1ull << 30);
#else
  (void)device;
  return 0;
#endif
}

void release_cached_memory(const c10::Device& device) {
#ifdef MILESRT_TORCH_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::emptyCache();
#else
  (void)device;
#endif
}

}  // namespace milesrt::llm
