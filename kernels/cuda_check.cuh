#pragma once
// Every CUDA runtime call goes through MILESRT_CUDA_CHECK: a failure throws with the call, the
// file, the line and CUDA's own error string.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#define MILESRT_CUDA_CHECK(call)                                                     \
  do {                                                                               \
    cudaError_t milesrt_err_ = (call);                                               \
    if (milesrt_err_ != cudaSuccess) {                                               \
      throw std::runtime_error(std::string(#call) + " failed at " + __FILE__ + ":" + \
                               std::to_string(__LINE__) + ": " +                     \
                               cudaGetErrorString(milesrt_err_));                    \
    }                                                                                \
  } while (0)
