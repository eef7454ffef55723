// The CUDA AdamW step (one pass of kernels/optim/adamw) against the CPU's ATen step.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <limits>

#include "actors/lib/rl/optimizer.hpp"

namespace milesrt::rl {
namespace {

const at::Device kCuda(at::kCUDA, 0);

double rel_diff(const at::Tensor& a, const at::Tensor& b) {
  auto x = a.to(at::kCPU, at::kDouble), y = b.to(at::kCPU, at::kDouble);
  return (x - y).norm().item<double>() / std::max(1e-30, y.norm().item<double>());
}

TEST(AdamWCudaStep, FollowsTheCpuStep) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  adamw_options o;
  o.lr = 1e-3;
  o.weight_decay = 0.1;
  o.grad_clip = 0.5;  // the gradients below have norms of ~30: clipping is active
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  auto master = at::randn({1000}, gen, at::kDouble).to(at::kFloat);
  auto m_cpu = master.clone(), m_gpu = master.to(kCuda);
  adamw cpu(o, m_cpu), gpu(o, m_gpu);
  for (int step = 0; step < 3; ++step) {
    auto g = at::randn({1000}, gen, at::kDouble).to(at::kFloat);
    auto a = cpu.step(m_cpu, g);
    auto b = gpu.step(m_gpu, g.to(kCuda));
    EXPECT_NEAR(a.grad_norm, b.grad_norm, 1e-4 * a.grad_norm);
    EXPECT_EQ(a.lr, b.lr);
  }
  EXPECT_LT(rel_diff(m_gpu, m_cpu), 1e-6);
  EXPECT_LT(rel_diff(gpu.exp_avg_sq(), cpu.exp_avg_sq()), 1e-4);  // g^2 of a clipped g: a few ulps
  // A non-finite gradient is skipped and leaves everything as it was.
  auto before = m_gpu.clone();
  auto bad =
      at::full({1000}, std::numeric_limits<float>::quiet_NaN(), at::TensorOptions().device(kCuda));
  auto info = gpu.step(m_gpu, bad);
  EXPECT_TRUE(info.skipped);
  EXPECT_EQ(gpu.steps(), 3u);
  EXPECT_TRUE(at::equal(before, m_gpu));
}

}  // namespace
}  // namespace milesrt::rl
