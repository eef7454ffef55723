#include "kernels/train/train_kernels.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/decoder/bf16.hpp"

namespace milesrt::kernels {
namespace {

// The CPU references' backward against finite differences of their forward formulas (in fp32
// arithmetic on bf16-representable inputs): the formulas themselves are right.
TEST(TrainKernels, BackwardReferencesAreTheForwardsGradients) {
  auto bits = [](float f) { return float_to_bf16_bits(f); };
  {  // silu * up at a few points
    for (float g : {-3.f, -0.5f, 0.25f, 2.f}) {
      const float u = 0.75f, h = 1e-2f;
      auto f = [&](float gg, float uu) { return gg / (1.f + std::exp(-gg)) * uu; };
      uint16_t d = bits(1.f), gb = bits(g), ub = bits(u), dg, du;
      silu_mul_backward_cpu(&d, &gb, &ub, &dg, &du, 1);
      const float g_num =
          (f(bf16_bits_to_float(gb) + h, u) - f(bf16_bits_to_float(gb) - h, u)) / (2 * h);
      EXPECT_NEAR(bf16_bits_to_float(dg), g_num, 2e-2f * (1 + std::abs(g_num))) << g;
      EXPECT_NEAR(bf16_bits_to_float(du), f(bf16_bits_to_float(gb), 1.f), 1e-2f);
    }
  }
  {  // rope backward is the transpose of the forward's rotation: <rope(x), g> = <x, rope^T(g)>
    const int64_t d = 8;
    std::vector<uint16_t> x(d), g(d), c(d), s(d), fx(d), bg(d);
    for (int64_t i = 0; i < d; ++i) {
      x[i] = bits(0.5f + 0.25f * float(i));
      g[i] = bits(1.f - 0.125f * float(i));
      c[i] = bits(std::cos(0.3f * float(i % 4 + 1)));
      s[i] = bits(std::sin(0.3f * float(i % 4 + 1)));
    }
    rope_cpu(x.data(), c.data(), s.data(), fx.data(), 1, 1, d, false);
    rope_cpu(g.data(), c.data(), s.data(), bg.data(), 1, 1, d, true);
    double lhs = 0, rhs = 0;
    for (int64_t i = 0; i < d; ++i) {
      lhs += double(bf16_bits_to_float(fx[i])) * bf16_bits_to_float(g[i]);
      rhs += double(bf16_bits_to_float(x[i])) * bf16_bits_to_float(bg[i]);
    }
    EXPECT_NEAR(lhs, rhs, 0.05);
  }
  {  // rmsnorm: dx against central differences of sum(g * w * x * rstd(x)) in double
    const int64_t cols = 16;
    std::vector<uint16_t> x(cols), g(cols), w(cols), dx(cols);
    for (int64_t c = 0; c < cols; ++c) {
      x[c] = bits(std::sin(float(c)) * 2.f);
      g[c] = bits(std::cos(float(c) * 0.7f));
      w[c] = bits(1.f + 0.0625f * float(c % 3));
    }
    std::vector<float> dw(cols);
    rmsnorm_backward_cpu(g.data(), x.data(), w.data(), nullptr, dx.data(), dw.data(), 1, cols,
                         1e-6f);
    auto loss = [&](std::vector<double> v) {
      double ss = 0;
      for (double e : v) ss += e * e;
      const double r = 1 / std::sqrt(ss / cols + 1e-6);
      double l = 0;
      for (int64_t c = 0; c < cols; ++c)
        l += bf16_bits_to_float(g[c]) * bf16_bits_to_float(w[c]) * v[c] * r;
      return l;
    };
    std::vector<double> xv(cols);
    for (int64_t c = 0; c < cols; ++c) xv[c] = bf16_bits_to_float(x[c]);
    for (int64_t c = 0; c < cols; ++c) {
      auto a = xv, b = xv;
      a[c] += 1e-4;
      b[c] -= 1e-4;
      const double num = (loss(a) - loss(b)) / 2e-4;
      EXPECT_NEAR(bf16_bits_to_float(dx[c]), num, 1e-2 * (1 + std::abs(num))) << c;
    }
    // The residual stream's own gradient joins dx (the loss gains sum(r * x)): each element moves
    // by r, rounded once.
    std::vector<uint16_t> r(cols), dxr(cols);
    for (int64_t c = 0; c < cols; ++c) r[c] = bits(0.25f * float(c % 5) - 0.5f);
    rmsnorm_backward_cpu(g.data(), x.data(), w.data(), r.data(), dxr.data(), dw.data(), 1, cols,
                         1e-6f);
    for (int64_t c = 0; c < cols; ++c) {
      const float want = bf16_bits_to_float(dx[c]) + bf16_bits_to_float(r[c]);
      EXPECT_NEAR(bf16_bits_to_float(dxr[c]), want, 1e-2f * (1 + std::abs(want))) << c;
    }
  }
}

// The log-prob/entropy backward's reference against central differences of
// g_lp * logp(target) + g_ent * H over fp32 copies of the logits, in double.
TEST(TrainKernelsCpu, LogProbBackwardIsTheGradientOfLogProbAndEntropy) {
  const int64_t V = 9;
  const float T = 0.9f;
  std::vector<uint16_t> x(V);
  for (int64_t j = 0; j < V; ++j) x[j] = float_to_bf16_bits(std::sin(1.3f * float(j)) * 2.f);
  auto objective = [&](const std::vector<double>& z, double* lse_out, double* h_out) {
    double m = -1e30, s = 0, zs = 0;
    for (double v : z) m = std::max(m, v / T);
    for (double v : z) s += std::exp(v / T - m);
    const double lse = m + std::log(s);
    for (double v : z) zs += std::exp(v / T - lse) * (v / T);
    if (lse_out) *lse_out = lse;
    if (h_out) *h_out = lse - zs;
    return 0.7 * (z[3] / T - lse) - 0.4 * (lse - zs);
  };
  std::vector<double> z(V);
  for (int64_t j = 0; j < V; ++j) z[j] = bf16_bits_to_float(x[j]);
  double lse, h;
  objective(z, &lse, &h);
  const int64_t target = 3;
  const float flse = float(lse), fh = float(h), glp = 0.7f, gent = -0.4f;
  auto g = x;
  logprob_backward_cpu(g.data(), 1, V, V, &target, &flse, &fh, &glp, &gent, T);
  for (int64_t j = 0; j < V; ++j) {
    auto a = z, b = z;
    a[j] += 1e-5;
    b[j] -= 1e-5;
    const double num = (objective(a, nullptr, nullptr) - objective(b, nullptr, nullptr)) / 2e-5;
    EXPECT_NEAR(bf16_bits_to_float(g[j]), num, 1e-2 * (1 + std::abs(num))) << j;
  }
}

}  // namespace
}  // namespace milesrt::kernels
