#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cuda_testing.hpp"
#include "kernels/decoder/bf16.hpp"
#include "kernels/device.hpp"
#include "kernels/train/train_kernels.hpp"

namespace milesrt::kernels {
namespace {

#ifdef MILESRT_HAVE_CUDA
using namespace milesrt::kernels::testing;
#endif

// Each training kernel against its CPU reference. The GPU contracts products and sums into FMAs and
// reduces in a tree, so a bf16 result may sit one step (two after a reduction) from the CPU's.
TEST(TrainKernelsCuda, MatchTheCpuReferences) {
#ifndef MILESRT_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA kernels";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  // rmsnorm backward: a hidden-size row (2048: 8 columns a thread) and a head row (128), with a
  // last block of rows that is not full (4,100 rows: 3 a block).
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{37, 2048}, {130, 128}, {4100, 128}}) {
    auto x = random_bf16(rows * cols, 1, 0.f, 2.f), g = random_bf16(rows * cols, 2, 0.f, 1.f);
    auto w = random_bf16(cols, 3, 1.f, 0.1f);
    std::vector<uint16_t> dx_ref(rows * cols);
    std::vector<float> dw_ref(cols);
    rmsnorm_backward_cpu(g.data(), x.data(), w.data(), dx_ref.data(), dw_ref.data(), rows, cols,
                         1e-6f);
    auto *dxp = dev(x), *dgp = dev(g), *dwp = dev(w), *ddx = dev(dx_ref);
    auto* ddw = dev(dw_ref);
    auto* ws = dev(std::vector<float>(rmsnorm_backward_workspace(rows, cols) / 4));
    rmsnorm_backward_cuda(dgp, dxp, dwp, ddx, ddw, rows, cols, 1e-6f, ws, nullptr);
    EXPECT_LE(max_ulps(host(ddx, dx_ref.size()), dx_ref), 2) << rows << "x" << cols;
    auto dw = host(ddw, cols);
    double worst = 0;
    for (int64_t c = 0; c < cols; ++c)
      worst = std::max(worst, double(std::abs(dw[c] - dw_ref[c]) / (1e-3 + std::abs(dw_ref[c]))));
    EXPECT_LT(worst, 1e-3) << rows << "x" << cols;  // fp32 sums of up to 4,100 terms in two orders
    for (void* p : {(void*)dxp, (void*)dgp, (void*)dwp, (void*)ddx, (void*)ddw, (void*)ws})
      cudaFree(p);
  }
  {  // rope forward and backward, head size 128 and 64
    for (int64_t d : {128, 64}) {
      const int64_t rows = 23, heads = 6;
      auto x = random_bf16(rows * heads * d, 4, 0.f, 1.f);
      std::vector<uint16_t> cos(rows * d), sin(rows * d);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < d; ++i) {
          const float a = float(r) / std::pow(10000.f, float(2 * (i % (d / 2))) / float(d));
          cos[r * d + i] = float_to_bf16_bits(std::cos(a));
          sin[r * d + i] = float_to_bf16_bits(std::sin(a));
        }
      for (bool backward : {false, true}) {
        std::vector<uint16_t> ref(x.size());
        rope_cpu(x.data(), cos.data(), sin.data(), ref.data(), rows, heads, d, backward);
        auto *dxp = dev(x), *dc = dev(cos), *ds = dev(sin), *dout = dev(ref);
        rope_cuda(dxp, dc, ds, dout, rows, heads, d, backward, nullptr);
        EXPECT_LE(max_ulps(host(dout, ref.size()), ref), 1)
            << "d " << d << (backward ? " backward" : " forward");
        for (void* p : {(void*)dxp, (void*)dc, (void*)ds, (void*)dout}) cudaFree(p);
      }
    }
  }
  {  // silu_mul forward and backward
    const int64_t n = 10007;
    auto g = random_bf16(n, 5, 0.f, 3.f), u = random_bf16(n, 6, 0.f, 1.f),
         d = random_bf16(n, 7, 0.f, 1.f);
    std::vector<uint16_t> out(n), dg(n), du(n);
    silu_mul_forward_cpu(g.data(), u.data(), out.data(), n);
    silu_mul_backward_cpu(d.data(), g.data(), u.data(), dg.data(), du.data(), n);
    auto *pg = dev(g), *pu = dev(u), *pd = dev(d), *po = dev(out), *pdg = dev(dg), *pdu = dev(du);
    silu_mul_forward_cuda(pg, pu, po, n, nullptr);
    silu_mul_backward_cuda(pd, pg, pu, pdg, pdu, n, nullptr);
    EXPECT_LE(max_ulps(host(po, n), out), 1);
    EXPECT_LE(max_ulps(host(pdg, n), dg), 1);
    EXPECT_LE(max_ulps(host(pdu, n), du), 1);
    for (void* p : {(void*)pg, (void*)pu, (void*)pd, (void*)po, (void*)pdg, (void*)pdu})
      cudaFree(p);
  }
#endif
}

}  // namespace
}  // namespace milesrt::kernels
