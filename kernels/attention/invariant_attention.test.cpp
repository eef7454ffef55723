#include "kernels/attention/invariant_attention.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/decoder/bf16.hpp"

namespace milesrt::kernels {
namespace {

// The host reference against plain causal softmax attention in double: two packed sequences
// (lengths 3 and 21: a partial key chunk and several), 4 query heads over 2 key heads.
TEST(InvariantAttentionCpu, IsCausalSoftmaxAttention) {
  constexpr int64_t D = 128, H = 4, KH = 2;
  const std::vector<int64_t> lens = {3, 21};
  const int64_t T = 24;
  std::mt19937 gen(5);
  std::normal_distribution<float> nd(0.f, 1.f);
  auto randv = [&](int64_t n) {
    std::vector<uint16_t> v(n);
    for (auto& x : v) x = float_to_bf16_bits(nd(gen));
    return v;
  };
  auto q = randv(T * H * D), k = randv(T * KH * D), v = randv(T * KH * D);
  std::vector<int32_t> seq, pos, start = {0, 3};
  for (int32_t s = 0; s < 2; ++s)
    for (int32_t j = 0; j < lens[s]; ++j) {
      seq.push_back(s);
      pos.push_back(j);
    }
  std::vector<uint16_t> out(T * H * D);
  std::vector<float> lse(H * T);
  invariant_attention_args a;
  a.q = q.data();
  a.k = k.data();
  a.v = v.data();
  a.seq = seq.data();
  a.pos = pos.data();
  a.kv_start = start.data();
  a.out = out.data();
  a.lse = lse.data();
  a.rows = T;
  a.heads = H;
  a.kv_heads = KH;
  a.scale = 1.f / std::sqrt(float(D));
  invariant_attention_cpu(a);
  auto f = [](uint16_t b) { return double(bf16_bits_to_float(b)); };
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kvh = h / (H / KH), first = start[seq[t]];
      std::vector<double> s(pos[t] + 1);
      double mx = -1e300;
      for (int64_t j = 0; j <= pos[t]; ++j) {
        double dot = 0;
        for (int64_t i = 0; i < D; ++i)
          dot += f(q[(t * H + h) * D + i]) * f(k[((first + j) * KH + kvh) * D + i]);
        s[j] = dot * a.scale;
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (double x : s) sum += std::exp(x - mx);
      EXPECT_NEAR(lse[h * T + t], mx + std::log(sum), 1e-4) << t << "," << h;
      for (int64_t i = 0; i < D; i += 17) {
        double o = 0;
        for (int64_t j = 0; j <= pos[t]; ++j)
          o += std::exp(s[j] - mx) / sum * f(v[((first + j) * KH + kvh) * D + i]);
        EXPECT_NEAR(f(out[(t * H + h) * D + i]), o, 1e-2 * (1 + std::abs(o))) << t << "," << h;
      }
    }
  }
}

}  // namespace
}  // namespace milesrt::kernels
