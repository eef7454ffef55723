#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cuda_testing.hpp"
#include "kernels/decoder/bf16.hpp"
#include "kernels/decoder/decoder_kernels.hpp"
#include "kernels/device.hpp"

namespace milesrt::kernels {
namespace {

#ifdef MILESRT_HAVE_CUDA
using namespace milesrt::kernels::testing;
#endif

// Each kernel against its CPU reference: element-wise parts bit for bit (0 ulps); a value that
// went through an RMSNorm within one bf16 step, two after the product with the weight (the sum
// of squares is reduced in another order).
TEST(DecoderKernelsCuda, MatchTheCpuReferences) {
#ifndef MILESRT_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA kernels";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  {  // add_rmsnorm, with and without the residual add
    const int64_t rows = 37, cols = 1024;
    auto h = random_bf16(rows * cols, 1, 0.f, 2.f), d = random_bf16(rows * cols, 2, 0.f, 1.f);
    auto w = random_bf16(cols, 3, 1.f, 0.1f);
    for (bool with_delta : {true, false}) {
      auto h_ref = h;
      std::vector<uint16_t> x_ref(rows * cols);
      add_rmsnorm_cpu(h_ref.data(), with_delta ? d.data() : nullptr, w.data(), x_ref.data(), rows,
                      cols, 1e-6f);
      auto *dh = dev(h), *dd = dev(d), *dw = dev(w), *dx = dev(x_ref);
      add_rmsnorm_cuda(dh, with_delta ? dd : nullptr, dw, dx, rows, cols, 1e-6f, nullptr);
      EXPECT_EQ(host(dh, h.size()), h_ref);  // the residual sum is element-wise
      // One step in the normalised value can become two after the product with w is rounded.
      EXPECT_LE(max_ulps(host(dx, x_ref.size()), x_ref), 2);
      // Out of place (the training path's): h untouched, the sum and x as in place.
      auto *dh2 = dev(h), *dsum = dev(std::vector<uint16_t>(h.size(), 0)), *dx2 = dev(x_ref);
      add_rmsnorm_out_cuda(dh2, with_delta ? dd : nullptr, dsum, dw, dx2, rows, cols, 1e-6f,
                           nullptr);
      EXPECT_EQ(host(dh2, h.size()), h);
      if (with_delta) {
        EXPECT_EQ(host(dsum, h.size()), h_ref);
      }
      EXPECT_EQ(host(dx2, x_ref.size()), host(dx, x_ref.size()));
      for (void* p :
           {(void*)dh, (void*)dd, (void*)dw, (void*)dx, (void*)dh2, (void*)dsum, (void*)dx2})
        cudaFree(p);
    }
  }
  {  // qk_rope_append, with and without QK norm (Qwen3 vs Llama), GQA 16/8
    const int64_t T = 19, H = 16, KH = 8, D = kFusedHeadDim, slots_n = 64;
    auto qkv = random_bf16(T * (H + 2 * KH) * D, 4, 0.f, 1.f);
    auto qn = random_bf16(D, 5, 1.f, 0.1f), kn = random_bf16(D, 6, 1.f, 0.1f);
    std::vector<uint16_t> cos(T * D), sin(T * D);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < D; ++i) {
        const double f = double(t * 3 + 1) * std::pow(1e6, -double(2 * (i % (D / 2))) / double(D));
        cos[t * D + i] = float_to_bf16_bits(float(std::cos(f)));
        sin[t * D + i] = float_to_bf16_bits(float(std::sin(f)));
      }
    std::vector<int64_t> slots(T);
    for (int64_t t = 0; t < T; ++t) slots[t] = (t * 7 + 3) % slots_n;
    for (bool norm : {true, false}) {
      std::vector<uint16_t> q_ref(T * H * D), k_ref(slots_n * KH * D, 0),
          v_ref(slots_n * KH * D, 0);
      qk_rope_args a;
      a.qkv = qkv.data();
      a.q_norm = norm ? qn.data() : nullptr;
      a.k_norm = norm ? kn.data() : nullptr;
      a.cos = cos.data();
      a.sin = sin.data();
      a.slots = slots.data();
      a.q_out = q_ref.data();
      a.k_cache = k_ref.data();
      a.v_cache = v_ref.data();
      a.tokens = T;
      a.heads = H;
      a.kv_heads = KH;
      qk_rope_append_cpu(a);
      auto *dqkv = dev(qkv), *dqn = dev(qn), *dkn = dev(kn), *dc = dev(cos), *ds = dev(sin);
      auto *dq = dev(std::vector<uint16_t>(q_ref.size())),
           *dk = dev(std::vector<uint16_t>(k_ref.size(), 0)),
           *dv = dev(std::vector<uint16_t>(v_ref.size(), 0));
      auto* dslots = dev(slots);
      a.qkv = dqkv;
      a.q_norm = norm ? dqn : nullptr;
      a.k_norm = norm ? dkn : nullptr;
      a.cos = dc;
      a.sin = ds;
      a.slots = dslots;
      a.q_out = dq;
      a.k_cache = dk;
      a.v_cache = dv;
      qk_rope_append_cuda(a, nullptr);
      EXPECT_LE(max_ulps(host(dq, q_ref.size()), q_ref), norm ? 1 : 0);
      EXPECT_LE(max_ulps(host(dk, k_ref.size()), k_ref), norm ? 1 : 0);
      EXPECT_EQ(host(dv, v_ref.size()), v_ref);
      for (void* p : {(void*)dqkv, (void*)dqn, (void*)dkn, (void*)dc, (void*)ds, (void*)dq,
                      (void*)dk, (void*)dv, (void*)dslots})
        cudaFree(p);
    }
  }
  {  // silu_mul
    const int64_t rows = 33, inter = 3072;
    auto gu = random_bf16(rows * 2 * inter, 7, 0.f, 3.f);
    std::vector<uint16_t> ref(rows * inter);
    silu_mul_cpu(gu.data(), ref.data(), rows, inter);
    auto* dgu = dev(gu);
    auto* dout = dev(ref);
    cudaMemset(dout, 0, ref.size() * 2);
    silu_mul_cuda(dgu, dout, rows, inter, nullptr);
    EXPECT_LE(max_ulps(host(dout, ref.size()), ref), 1);  // expf on the device vs the host's
    cudaFree(dgu);
    cudaFree(dout);
  }
#endif
}

}  // namespace
}  // namespace milesrt::kernels
