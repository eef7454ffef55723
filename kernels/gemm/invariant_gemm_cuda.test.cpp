#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda_testing.hpp"
#include "kernels/device.hpp"
#include "kernels/gemm/invariant_gemm.hpp"

namespace milesrt::kernels {
namespace {

// The property the true on-policy mode needs: a row's result does not depend on how many rows
// share the call or where it sits among them, bit for bit (M from 1 to 1,000 at several offsets,
// against one call over 1,024 rows: every tile shape the kernel picks by M), for Qwen3-1.7B's
// projection shapes; and it is the product (against the host reference, within fp32 summation
// order and one bf16 rounding).
TEST(InvariantGemmCuda, RowsDoNotDependOnTheRowsBesideThem) {
#ifndef MILESRT_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA kernels";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  using testing::dev;
  using testing::host;
  const int64_t rows = 1024;
  for (auto [n, k] : {std::pair<int64_t, int64_t>{2048, 2048}, {6144, 2048}, {2048, 6144}}) {
    SCOPED_TRACE("n " + std::to_string(n) + ", k " + std::to_string(k));
    auto x = testing::random_bf16(rows * k, 21, 0.f, 1.f);
    auto w = testing::random_bf16(n * k, 22, 0.f, 0.02f);
    auto* dx = dev(x);
    auto* dw = dev(w);
    auto* dall = dev(std::vector<uint16_t>(rows * n, 0));
    invariant_gemm_bf16_cuda(dx, k, dw, dall, n, rows, n, k, nullptr);
    const auto all = host(dall, rows * n);
    for (auto [m, at] : {std::pair<int64_t, int64_t>{1, 0},
                         {1, 517},
                         {2, 3},
                         {17, 100},
                         {64, 0},
                         {257, 700},
                         {1000, 24}}) {
      auto* dpart = dev(std::vector<uint16_t>(m * n, 0));
      invariant_gemm_bf16_cuda(dx + at * k, k, dw, dpart, n, m, n, k, nullptr);
      const auto part = host(dpart, m * n);
      EXPECT_TRUE(std::equal(part.begin(), part.end(), all.begin() + at * n))
          << m << " rows from row " << at;
      cudaFree(dpart);
    }
    // Against the host reference on a few rows.
    const int64_t check = 4;
    std::vector<uint16_t> ref(check * n);
    invariant_gemm_bf16_cpu(x.data() + 300 * k, k, w.data(), ref.data(), n, check, n, k);
    const double scale = std::sqrt(double(k)) * 0.02;  // the sums' standard deviation
    double worst = 0;
    for (int64_t i = 0; i < check * n; ++i) {
      const double a = bf16_bits_to_float(all[300 * n + i]), b = bf16_bits_to_float(ref[i]);
      worst = std::max(worst, std::abs(a - b) / (std::abs(b) * std::ldexp(1.0, -7) + 1e-3 * scale));
    }
    EXPECT_LE(worst, 1.0);
    for (void* p : {(void*)dx, (void*)dw, (void*)dall}) cudaFree(p);
  }
#endif
}

// Whether weights stacked along N (the engine's fused QKV and gate/up projections) give the same
// columns as each weight alone (the trainer's separate projections): each column is its own sum
// over K, but the pinned algorithm is chosen per N. Decides whether the trainer must use the fused
// layout in the true on-policy mode.
TEST(InvariantGemmCuda, StackedWeightsGiveTheSameColumnsAsEachAlone) {
#ifndef MILESRT_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA kernels";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  using testing::dev;
  using testing::host;
  const int64_t m = 37, k = 2048, n1 = 2048, n2 = 1024;  // q and k of Qwen3-1.7B
  auto x = testing::random_bf16(m * k, 31, 0.f, 1.f);
  auto w = testing::random_bf16((n1 + n2) * k, 32, 0.f, 0.02f);
  auto* dx = dev(x);
  auto* dw = dev(w);
  auto* dboth = dev(std::vector<uint16_t>(m * (n1 + n2), 0));
  auto* d1 = dev(std::vector<uint16_t>(m * n1, 0));
  auto* d2 = dev(std::vector<uint16_t>(m * n2, 0));
  invariant_gemm_bf16_cuda(dx, k, dw, dboth, n1 + n2, m, n1 + n2, k, nullptr);
  invariant_gemm_bf16_cuda(dx, k, dw, d1, n1, m, n1, k, nullptr);
  invariant_gemm_bf16_cuda(dx, k, dw + n1 * k, d2, n2, m, n2, k, nullptr);
  const auto both = host(dboth, m * (n1 + n2)), one = host(d1, m * n1), two = host(d2, m * n2);
  int64_t differ = 0;
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < n1; ++c) differ += both[r * (n1 + n2) + c] != one[r * n1 + c];
    for (int64_t c = 0; c < n2; ++c) differ += both[r * (n1 + n2) + n1 + c] != two[r * n2 + c];
  }
  EXPECT_EQ(differ, 0) << "of " << m * (n1 + n2) << " outputs";
  for (void* p : {(void*)dx, (void*)dw, (void*)dboth, (void*)d1, (void*)d2}) cudaFree(p);
#endif
}

}  // namespace
}  // namespace milesrt::kernels
