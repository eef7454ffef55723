#pragma once
// Helpers of the kernels' GPU tests (gtest): bf16 test data, device copies both ways, and the
// distance between two bf16 arrays in units in the last place. Tests only.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/decoder/bf16.hpp"

#ifdef MILESRT_HAVE_CUDA
#include <cuda_runtime.h>

namespace milesrt::kernels::testing {

/// n bf16 values drawn from N(mean, sd).
inline std::vector<uint16_t> random_bf16(size_t n, uint32_t seed, float mean, float sd) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(mean, sd);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = float_to_bf16_bits(d(gen));
  return v;
}

/// A device copy of v (cudaFree it).
template <typename T>
T* dev(const std::vector<T>& v) {
  T* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, v.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return p;
}

/// n values of T from the device.
template <typename T>
std::vector<T> host(const T* p, size_t n) {
  std::vector<T> v(n);
  EXPECT_EQ(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}

/// Largest difference in bf16 steps (units in the last place) between two bf16 arrays.
inline int max_ulps(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  int worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    auto key = [](uint16_t x) { return (x & 0x8000) ? -int(x & 0x7fff) : int(x); };
    worst = std::max(worst, std::abs(key(a[i]) - key(b[i])));
  }
  return worst;
}

}  // namespace milesrt::kernels::testing
#endif
