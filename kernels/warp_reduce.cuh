#pragma once
// Warp-level reductions shared by the kernels (one copy; each kernel file includes it).
#include <cuda_runtime.h>

namespace milesrt::kernels {

/// The sum of v over the 32 lanes of a warp (every lane gets it), by butterfly shuffles: the same
/// order of additions on every lane and every call.
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

}  // namespace milesrt::kernels
