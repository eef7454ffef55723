#include "kernels/cuda_check.cuh"
#include "kernels/device.hpp"

namespace milesrt::kernels {

bool cuda_compiled() { return true; }

int cuda_device_count() {
  int n = 0;
  // No driver or no GPU is a normal state on CPU machines, not an error.
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::string cuda_summary() {
  std::string s = "CUDA kernels compiled (sm_" + std::to_string(MILESRT_CUDA_ARCH) + ")";
  int n = cuda_device_count();
  if (n == 0) return s + ", no GPU visible";
  cudaDeviceProp prop{};
  MILESRT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  return s + ", " + std::to_string(n) + " GPU" + (n > 1 ? "s" : "") + ": " + prop.name;
}

bool cuda_memory_info(int device, size_t& free_bytes, size_t& total_bytes) {
  int previous = 0;
  if (cuda_device_count() <= device || cudaGetDevice(&previous) != cudaSuccess) return false;
  bool ok = cudaSetDevice(device) == cudaSuccess &&
            cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess;
  cudaSetDevice(previous);
  if (!ok) cudaGetLastError();
  return ok;
}

}  // namespace milesrt::kernels
