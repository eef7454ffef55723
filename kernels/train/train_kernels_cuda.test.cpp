#include <gtest/gtest.h>

#include <algorithm>
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
    auto w = random_bf16(cols, 3, 1.f, 0.1f), res = random_bf16(rows * cols, 5, 0.f, 0.5f);
    auto acc = random_bf16(cols, 6, 0.f, 4.f);
    for (bool with_res : {false, true}) {
      const uint16_t* r = with_res ? res.data() : nullptr;
      std::vector<uint16_t> dx_ref(rows * cols);
      std::vector<float> dw_ref(cols);
      rmsnorm_backward_cpu(g.data(), x.data(), w.data(), r, dx_ref.data(), dw_ref.data(), rows,
                           cols, 1e-6f);
      auto *dxp = dev(x), *dgp = dev(g), *dwp = dev(w), *ddx = dev(dx_ref), *dres = dev(res);
      auto* ddw = dev(dw_ref);
      auto* dacc = dev(acc);
      auto* ws = dev(std::vector<float>(rmsnorm_backward_workspace(rows, cols) / 4));
      rmsnorm_backward_cuda(dgp, dxp, dwp, with_res ? dres : nullptr, ddx, ddw, nullptr, rows, cols,
                            1e-6f, ws, nullptr);
      if (!with_res) {
        EXPECT_LE(max_ulps(host(ddx, dx_ref.size()), dx_ref), 2) << rows << "x" << cols;
      } else {  // the sum can cancel: two steps at the larger of its terms
        const auto got = host(ddx, dx_ref.size());
        double worst = 0;
        for (size_t i = 0; i < got.size(); ++i) {
          const double a = bf16_bits_to_float(got[i]), b = bf16_bits_to_float(dx_ref[i]);
          const double scale = std::max(std::abs(b), double(std::abs(bf16_bits_to_float(res[i]))));
          worst = std::max(worst, std::abs(a - b) / (scale * std::ldexp(1.0, -7) + 1e-30));
        }
        EXPECT_LE(worst, 2.0) << rows << "x" << cols;
      }
      auto dw = host(ddw, cols);
      double worst = 0;
      for (int64_t c = 0; c < cols; ++c)
        worst = std::max(worst, double(std::abs(dw[c] - dw_ref[c]) / (1e-3 + std::abs(dw_ref[c]))));
      EXPECT_LT(worst, 1e-3) << rows << "x" << cols;  // fp32 sums of 4,100 terms in two orders
      // Accumulating into a bf16 gradient instead: acc + dw, rounded once, dw left alone.
      rmsnorm_backward_cuda(dgp, dxp, dwp, with_res ? dres : nullptr, ddx, nullptr, dacc, rows,
                            cols, 1e-6f, ws, nullptr);
      std::vector<uint16_t> acc_ref(cols);
      for (int64_t c = 0; c < cols; ++c)
        acc_ref[c] = float_to_bf16_bits(bf16_bits_to_float(acc[c]) + dw[c]);
      EXPECT_EQ(host(dacc, cols), acc_ref) << rows << "x" << cols;
      for (void* p : {(void*)dxp, (void*)dgp, (void*)dwp, (void*)ddx, (void*)ddw, (void*)ws,
                      (void*)dres, (void*)dacc})
        cudaFree(p);
    }
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

// The log-prob/entropy backward against its CPU reference: a vocabulary with a ragged tail and one
// whose rows are not 16-byte aligned (one element at a time), within one bf16 step (the GPU
// contracts into FMAs).
TEST(TrainKernelsCuda, LogProbBackwardMatchesTheCpuReference) {
#ifndef MILESRT_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA kernels";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  for (int64_t vocab : {int64_t(151936), int64_t(1003)}) {
    const int64_t rows = 7;
    auto logits = random_bf16(rows * vocab, 8, 0.f, 3.f);
    std::vector<int64_t> target(rows);
    std::vector<float> lse(rows), ent(rows), glp(rows), gent(rows);
    for (int64_t r = 0; r < rows; ++r) {
      target[r] = (r * 7919) % vocab;
      lse[r] = 12.f + 0.1f * float(r);
      ent[r] = 9.f - 0.2f * float(r);
      glp[r] = r % 2 ? 0.5f : -0.25f;
      gent[r] = 0.01f * float(r);
    }
    auto ref = logits;
    logprob_backward_cpu(ref.data(), rows, vocab, vocab, target.data(), lse.data(), ent.data(),
                         glp.data(), gent.data(), 0.7f);
    auto* dl = dev(logits);
    auto* dt = dev(target);
    auto *dlse = dev(lse), *dent = dev(ent), *dglp = dev(glp), *dgent = dev(gent);
    logprob_backward_cuda(dl, rows, vocab, vocab, dt, dlse, dent, dglp, dgent, 0.7f, nullptr);
    EXPECT_LE(max_ulps(host(dl, ref.size()), ref), 1) << vocab;
    for (void* p : {(void*)dl, (void*)dt, (void*)dlse, (void*)dent, (void*)dglp, (void*)dgent})
      cudaFree(p);
  }
#endif
}

// The fused q/k norm + rotary embedding, forward and backward, against the composition of the CPU
// references (add_rmsnorm_cpu then rope_cpu; rope_cpu's backward then rmsnorm_backward_cpu): GQA
// head counts, and more head rows than one a block (dw summed over blocks).
TEST(TrainKernelsCuda, QkNormRopeMatchesTheComposedCpuReferences) {
#ifndef MILESRT_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA kernels";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  constexpr int64_t d = 128;
  for (auto [rows, heads] : {std::pair<int64_t, int64_t>{19, 16}, {300, 8}}) {
    auto x = random_bf16(rows * heads * d, 12, 0.f, 2.f),
         g = random_bf16(rows * heads * d, 13, 0.f, 1.f);
    auto w = random_bf16(d, 14, 1.f, 0.1f);
    std::vector<uint16_t> cos(rows * d), sin(rows * d);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < d; ++i) {
        const double f = double(r * 3 + 1) * std::pow(1e6, -double(2 * (i % (d / 2))) / double(d));
        cos[r * d + i] = float_to_bf16_bits(float(std::cos(f)));
        sin[r * d + i] = float_to_bf16_bits(float(std::sin(f)));
      }
    std::vector<uint16_t> out_ref(x.size()), dx_ref(x.size());
    std::vector<float> dw_ref(d);
    qk_norm_rope_cpu(x.data(), w.data(), cos.data(), sin.data(), out_ref.data(), rows, heads,
                     1e-6f);
    qk_norm_rope_backward_cpu(g.data(), x.data(), w.data(), cos.data(), sin.data(), dx_ref.data(),
                              dw_ref.data(), rows, heads, 1e-6f);
    auto* dxp = dev(x);
    auto* dgp = dev(g);
    auto* dwp = dev(w);
    auto* dc = dev(cos);
    auto* ds = dev(sin);
    auto* dout = dev(out_ref);
    auto* ddx = dev(dx_ref);
    auto* ddw = dev(dw_ref);
    auto* ws = dev(std::vector<float>(rmsnorm_backward_workspace(rows * heads, d) / 4));
    qk_norm_rope_cuda(dxp, dwp, dc, ds, dout, rows, heads, 1e-6f, nullptr);
    // One step in a normalised value (another order of the sum of squares) can become two after
    // the products with w and the rotation are rounded.
    EXPECT_LE(max_ulps(host(dout, out_ref.size()), out_ref), 2) << rows << "x" << heads;
    qk_norm_rope_backward_cuda(dgp, dxp, dwp, dc, ds, ddx, ddw, nullptr, rows, heads, 1e-6f, ws,
                               nullptr);
    // dy itself (rope's backward, contracted into FMAs on the GPU) may sit one step away, which
    // the norm's cancellation can magnify: at most 1 element in 10,000 beyond 3 steps, none
    // beyond 1/64 of its head row's largest gradient.
    {
      const auto got = host(ddx, dx_ref.size());
      int64_t far = 0;
      double worst = 0;
      for (int64_t r = 0; r < rows * heads; ++r) {
        double row_max = 1e-30;
        for (int64_t c = 0; c < d; ++c)
          row_max = std::max(row_max, double(std::abs(bf16_bits_to_float(dx_ref[r * d + c]))));
        for (int64_t c = 0; c < d; ++c) {
          const int64_t e = r * d + c;
          far += max_ulps({got[e]}, {dx_ref[e]}) > 3;
          worst = std::max(
              worst, std::abs(double(bf16_bits_to_float(got[e])) - bf16_bits_to_float(dx_ref[e])) /
                         row_max);
        }
      }
      EXPECT_LE(far * 10000, rows * heads * d) << rows << "x" << heads;
      EXPECT_LT(worst, 1.0 / 64) << rows << "x" << heads;
    }
    const auto dw = host(ddw, d);
    double worst = 0;
    for (int64_t c = 0; c < d; ++c)
      worst = std::max(worst, double(std::abs(dw[c] - dw_ref[c]) / (1e-3 + std::abs(dw_ref[c]))));
    EXPECT_LT(worst, 1e-3) << rows << "x" << heads;
    for (void* p : {(void*)dxp, (void*)dgp, (void*)dwp, (void*)dc, (void*)ds, (void*)dout,
                    (void*)ddx, (void*)ddw, (void*)ws})
      cudaFree(p);
  }
#endif
}

}  // namespace
}  // namespace milesrt::kernels
