#pragma once
/// What CUDA this build and this machine offer. No ATen here: kernels are plain CUDA.

#include <cstddef>
#include <string>

namespace milesrt::kernels {

/// True when the CUDA kernels were compiled into this build.
bool cuda_compiled();
/// Number of usable CUDA devices; 0 without a GPU, a driver, or CUDA kernels in the build.
int cuda_device_count();
/// "CUDA kernels compiled (sm_90), 1 GPU: NVIDIA H200" or "CUDA kernels not compiled".
std::string cuda_summary();
/// Free and total memory of CUDA device `device`; false without one.
bool cuda_memory_info(int device, size_t& free_bytes, size_t& total_bytes);

}  // namespace milesrt::kernels
