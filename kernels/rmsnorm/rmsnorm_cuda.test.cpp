#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/device.hpp"
#include "kernels/rmsnorm/rmsnorm.hpp"
#ifdef MILESRT_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace milesrt::kernels {
namespace {

std::vector<float> random_vector(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// Shapes with tails: 1 column, fewer columns than threads, not a multiple of the block, large.
const std::vector<std::pair<int64_t, int64_t>> kShapes = {
    {1, 1}, {3, 7}, {5, 255}, {2, 257}, {17, 1000}, {4, 4097}, {300, 2048}};

TEST(RmsNormCuda, MatchesTheCpuReference) {
#ifndef MILESRT_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA kernels";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  for (auto [rows, cols] : kShapes) {
    auto x = random_vector(rows * cols, 11 + cols, -3.f, 3.f);
    auto w = random_vector(cols, 12 + cols, 0.5f, 1.5f);
    std::vector<float> want(rows * cols), got(rows * cols);
    rmsnorm_cpu(x.data(), w.data(), want.data(), rows, cols, 1e-6f);
    float *dx, *dw, *dy;
    ASSERT_EQ(cudaMalloc(&dx, x.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dw, w.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dy, got.size() * 4), cudaSuccess);
    cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dw, w.data(), w.size() * 4, cudaMemcpyHostToDevice);
    rmsnorm_cuda(dx, dw, dy, rows, cols, 1e-6f, nullptr);
    ASSERT_EQ(cudaMemcpy(got.data(), dy, got.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    cudaFree(dx);
    cudaFree(dw);
    cudaFree(dy);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 2e-5f * (1 + std::abs(want[i])))
          << "rows=" << rows << " cols=" << cols << " i=" << i;
    }
  }
#endif
}

}  // namespace
}  // namespace milesrt::kernels
