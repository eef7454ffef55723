#include "kernels/rmsnorm/rmsnorm.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

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
const std::vector<std::pair<int64_t, int64_t>> kShapes = {{1, 1},   {3, 7},     {5, 255},
                                                          {2, 257}, {17, 1000}, {4, 4097}};

TEST(RmsNormCpu, MatchesTheFormulaInDoublePrecision) {
  for (auto [rows, cols] : kShapes) {
    auto x = random_vector(rows * cols, 1 + cols, -3.f, 3.f);
    auto w = random_vector(cols, 2 + cols, 0.5f, 1.5f);
    std::vector<float> y(rows * cols);
    const float eps = 1e-6f;
    rmsnorm_cpu(x.data(), w.data(), y.data(), rows, cols, eps);
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int64_t c = 0; c < cols; ++c) ss += double(x[r * cols + c]) * x[r * cols + c];
      const double inv = 1.0 / std::sqrt(ss / cols + eps);
      for (int64_t c = 0; c < cols; ++c) {
        const double want = x[r * cols + c] * inv * w[c];
        ASSERT_NEAR(y[r * cols + c], want, 1e-5 * (1 + std::abs(want)))
            << "rows=" << rows << " cols=" << cols << " r=" << r << " c=" << c;
      }
    }
  }
}

TEST(RmsNormCpu, RowsAreIndependentOfTheBatch) {
  const int64_t rows = 9, cols = 333;
  auto x = random_vector(rows * cols, 7, -2.f, 2.f);
  auto w = random_vector(cols, 8, 0.5f, 1.5f);
  std::vector<float> all(rows * cols), one(cols);
  rmsnorm_cpu(x.data(), w.data(), all.data(), rows, cols, 1e-5f);
  for (int64_t r = 0; r < rows; ++r) {
    rmsnorm_cpu(x.data() + r * cols, w.data(), one.data(), 1, cols, 1e-5f);
    for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(one[c], all[r * cols + c]);
  }
}

}  // namespace
}  // namespace milesrt::kernels
