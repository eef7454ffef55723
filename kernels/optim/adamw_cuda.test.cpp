#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/decoder/bf16.hpp"
#include "kernels/device.hpp"
#include "kernels/optim/adamw.hpp"
#ifdef MILESRT_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/cuda_testing.hpp"
#endif

namespace milesrt::kernels {
namespace {

// The one-pass step on the GPU equals its CPU reference bit for bit (every operation is rounded
// as on the CPU: no contraction into FMAs), for bf16 and fp32 gradients, with clipping, the bf16
// weights refreshed and the gradient zeroed; also where the state and the gradient are zero, tiny
// or subnormal (the kernel's division and square root take their fp64 route there).
TEST(AdamWCuda, OnePassStepEqualsTheCpuReferenceBitForBit) {
#ifndef MILESRT_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA kernels";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  const int64_t n = 100003;
  std::mt19937 gen(11);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> master(n), m(n), v(n), g32(n);
  std::vector<uint16_t> g16(n);
  for (int64_t i = 0; i < n; ++i) {
    master[i] = d(gen);
    m[i] = 0.01f * d(gen);
    v[i] = 1e-4f * std::abs(d(gen));
    g32[i] = 3.f * d(gen);
    switch (i % 8) {
      case 0:  // an unused row: nothing yet
        g32[i] = m[i] = v[i] = 0.f;
        break;
      case 1:  // tiny gradients: subnormal second moments
        g32[i] *= 1e-19f;
        v[i] = 1e-40f * std::abs(d(gen));
        break;
      case 2:  // subnormal first moments, negative zero
        m[i] = (i % 16 == 2) ? -0.f : 1e-39f * d(gen);
        g32[i] = 0.f;
        break;
      default:
        break;
    }
    g16[i] = float_to_bf16_bits(g32[i]);
  }
  for (bool bf16 : {true, false}) {
    adamw_args a;
    a.n = n;
    a.lr = 1e-3f;
    a.weight_decay = 0.1f;
    a.step_size = 1e-3f / (1.f - std::pow(0.9f, 3.f));
    a.bc2_sqrt = std::sqrt(1.f - std::pow(0.999f, 3.f));
    a.grad_bf16 = bf16;
    a.zero_grad = true;
    // CPU
    auto cm = master, cmo = m, cv = v;
    auto cg16 = g16;
    auto cg32 = g32;
    std::vector<uint16_t> cw(n);
    float coef = 0.37f;
    a.master = cm.data();
    a.exp_avg = cmo.data();
    a.exp_avg_sq = cv.data();
    a.grad = bf16 ? static_cast<void*>(cg16.data()) : static_cast<void*>(cg32.data());
    a.weights_bf16 = cw.data();
    a.grad_coef = &coef;
    adamw_step_cpu(a);
    // GPU
    float *dm, *dmo, *dv, *dcoef;
    void* dg;
    uint16_t* dw;
    cudaMalloc(&dm, n * 4);
    cudaMalloc(&dmo, n * 4);
    cudaMalloc(&dv, n * 4);
    cudaMalloc(&dcoef, 4);
    cudaMalloc(&dg, n * 4);
    cudaMalloc(&dw, n * 2);
    cudaMemcpy(dm, master.data(), n * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dmo, m.data(), n * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dv, v.data(), n * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dcoef, &coef, 4, cudaMemcpyHostToDevice);
    if (bf16)
      cudaMemcpy(dg, g16.data(), n * 2, cudaMemcpyHostToDevice);
    else
      cudaMemcpy(dg, g32.data(), n * 4, cudaMemcpyHostToDevice);
    a.master = dm;
    a.exp_avg = dmo;
    a.exp_avg_sq = dv;
    a.grad = dg;
    a.weights_bf16 = dw;
    a.grad_coef = dcoef;
    adamw_step_cuda(a, nullptr);
    std::vector<float> gm(n), gmo(n), gv(n);
    std::vector<uint16_t> gw(n);
    std::vector<float> gg(n, 1.f);
    cudaMemcpy(gm.data(), dm, n * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(gmo.data(), dmo, n * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(gv.data(), dv, n * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(gw.data(), dw, n * 2, cudaMemcpyDeviceToHost);
    cudaMemcpy(gg.data(), dg, bf16 ? n * 2 : n * 4, cudaMemcpyDeviceToHost);
    EXPECT_EQ(gm, cm) << (bf16 ? "bf16" : "fp32") << " gradient";
    EXPECT_EQ(gmo, cmo);
    EXPECT_EQ(gv, cv);
    EXPECT_EQ(gw, cw);
    int64_t nonzero = 0;
    for (int64_t i = 0; i < (bf16 ? n / 2 : n); ++i) nonzero += gg[i] != 0.f;
    EXPECT_EQ(nonzero, 0) << "the gradient is zeroed";
    for (void* p : {(void*)dm, (void*)dmo, (void*)dv, (void*)dcoef, dg, (void*)dw}) cudaFree(p);
  }
#endif
}

// The step's own finiteness flag: 0 when every written weight is finite, 1 when one is not (in
// the four-a-thread body or the tail), with and without a bf16 copy; the CPU reference alike.
TEST(AdamWCuda, TheStepFlagsANonFiniteWeight) {
#ifndef MILESRT_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA kernels";
#else
  using testing::dev;
  using testing::host;
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  const int64_t n = 1003;
  for (int64_t bad : {int64_t(-1), int64_t(10), int64_t(1001)}) {
    for (bool refresh : {true, false}) {
      std::vector<float> master(n, 0.5f), m(n, 0.f), v(n, 0.f), g(n, 0.1f);
      if (bad >= 0) master[bad] = bad % 2 ? std::numeric_limits<float>::infinity() : NAN;
      adamw_args a;
      a.n = n;
      a.lr = 1e-3f;
      a.step_size = 1e-3f;
      a.grad_bf16 = false;
      auto cm = master, cmo = m, cv = v, cg = g;
      std::vector<uint16_t> cw(n);
      int32_t cflag = 0;
      a.master = cm.data();
      a.exp_avg = cmo.data();
      a.exp_avg_sq = cv.data();
      a.grad = cg.data();
      a.weights_bf16 = refresh ? cw.data() : nullptr;
      a.nonfinite = &cflag;
      adamw_step_cpu(a);
      EXPECT_EQ(cflag, bad >= 0 ? 1 : 0) << "cpu, bad " << bad << " refresh " << refresh;
      auto *dm = dev(master), *dmo = dev(m), *dv = dev(v), *dg = dev(g);
      auto* dw = dev(cw);
      auto* dflag = dev(std::vector<int32_t>{0});
      a.master = dm;
      a.exp_avg = dmo;
      a.exp_avg_sq = dv;
      a.grad = dg;
      a.weights_bf16 = refresh ? dw : nullptr;
      a.nonfinite = dflag;
      adamw_step_cuda(a, nullptr);
      EXPECT_EQ(host(dflag, 1)[0], bad >= 0 ? 1 : 0)
          << "gpu, bad " << bad << " refresh " << refresh;
      for (void* p : {(void*)dm, (void*)dmo, (void*)dv, (void*)dg, (void*)dw, (void*)dflag})
        cudaFree(p);
    }
  }
#endif
}

}  // namespace
}  // namespace milesrt::kernels
