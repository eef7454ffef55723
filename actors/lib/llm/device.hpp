#pragma once
/// Which libtorch this build links and which devices it can reach; the device and dtype a graph
/// file names (schemas/device.capnp) as libtorch's.

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <string>

#include "milesrt/device.capnp.h"
#include "runtime/core/problem.hpp"

namespace milesrt::llm {

/// "libtorch 2.11.0 (CUDA 13.0 part linked, 0 CUDA devices)": printed by `milesrt --version`.
std::string torch_summary();

/// How many threads libtorch's CPU operators may use on the calling thread (its OpenMP team size,
/// which OpenMP keeps per thread). milesrt gives each actor thread one (see app/main.cpp).
void set_intra_op_threads(int n);

/// cpu -> kCPU, cuda -> kCUDA (the current CUDA device).
c10::Device to_device(schema::Device device);

/// fp32 -> kFloat, bf16 -> kBFloat16.
c10::ScalarType to_dtype(schema::Dtype dtype);

/// Makes `device` the calling thread's current CUDA device (nothing for the CPU).
void set_current_device(const c10::Device& device);

/// Why the trueOnPolicy mode (docs/metrics.md#trainrollout-agreement) cannot run on `device` in
/// `dtype`, with or without LoRA adapters (a problem of field `trueOnPolicy`; none when it can):
/// the CPU paths agree bit for bit; on CUDA the batch-invariant kernels (invariant_ops.hpp) are
/// bf16 and know no adapters. (The head size, 128, is checked when the model loads.)
problem_list true_on_policy_problems(schema::Device device, schema::Dtype dtype, bool lora);

/// libtorch's current CUDA stream as the raw handle kernels/ takes (null without libtorch's CUDA
/// part).
void* current_cuda_stream();

/// Peak device memory of a phase (libtorch's CUDA caching allocator): reset_peak_memory at the
/// phase's start, peak_memory_gib (the most bytes allocated at once since, in GiB) at its end.
/// Both do nothing / return 0 off CUDA.
void reset_peak_memory(const c10::Device& device);
double peak_memory_gib(const c10::Device& device);
/// The bytes libtorch's allocator holds for tensors on `device` now, in GiB (0 off CUDA).
double allocated_memory_gib(const c10::Device& device);
/// Gives the memory libtorch's allocator caches on `device` (freed blocks) back to the driver.
void release_cached_memory(const c10::Device& device);

}  // namespace milesrt::llm
