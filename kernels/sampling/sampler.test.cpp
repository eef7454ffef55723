#include "kernels/sampling/sampler.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/sampling/philox.hpp"

namespace milesrt::kernels {
namespace {

// Known-answer vectors of Random123's kat_vectors for philox4x32_10.
TEST(Philox, MatchesRandom123KnownAnswers) {
  struct kat {
    uint32_t ctr[4], key[2], out[4];
  };
  const kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const auto& k : kats) {
    uint32_t c[4] = {k.ctr[0], k.ctr[1], k.ctr[2], k.ctr[3]};
    philox4x32_10(c, k.key[0], k.key[1]);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(c[i], k.out[i]);
  }
}

TEST(Philox, UniformIsInsideTheOpenIntervalAndDependsOnEveryInput) {
  const double a = philox_uniform(7, 3, 11);
  EXPECT_GT(a, 0.0);
  EXPECT_LT(a, 1.0);
  EXPECT_EQ(a, philox_uniform(7, 3, 11));
  EXPECT_NE(a, philox_uniform(8, 3, 11));
  EXPECT_NE(a, philox_uniform(7, 4, 11));
  EXPECT_NE(a, philox_uniform(7, 3, 12));
  EXPECT_NE(a, philox_uniform(7ull << 32, 3, 11));  // the seed's high half counts
}

sample_rows_args args_for(const std::vector<float>& logits, int64_t rows, int64_t vocab,
                          std::vector<float>& temp, std::vector<uint64_t>& seed,
                          std::vector<int64_t>& pos, std::vector<int64_t>& token,
                          std::vector<float>& lp, std::vector<float>& ent) {
  token.assign(rows, -1);
  lp.assign(rows, 0);
  ent.assign(rows, 0);
  sample_rows_args a;
  a.logits = logits.data();
  a.bf16 = false;
  a.rows = rows;
  a.vocab = vocab;
  a.ld = vocab;
  a.temperature = temp.data();
  a.seed = seed.data();
  a.position = pos.data();
  a.token = token.data();
  a.logprob = lp.data();
  a.entropy = ent.data();
  return a;
}

// Gumbel-max draws from softmax(z / T): over 20,000 positions, each token's frequency is within
// 4 standard deviations of its probability; log-prob and entropy are the exact ones.
TEST(SamplerCpu, DrawsFromTheSoftmaxAndReportsItsLogProbAndEntropy) {
  const std::vector<float> row = {1.0f, 2.0f, 0.5f, -1.0f, 2.5f};
  const int64_t V = 5, N = 20000;
  const float T = 0.8f;
  std::vector<float> logits;
  for (int64_t i = 0; i < N; ++i) logits.insert(logits.end(), row.begin(), row.end());
  std::vector<float> temp(N, T), lp, ent;
  std::vector<uint64_t> seed(N, 1234);
  std::vector<int64_t> pos(N), token;
  for (int64_t i = 0; i < N; ++i) pos[i] = i;
  sample_rows_cpu(args_for(logits, N, V, temp, seed, pos, token, lp, ent));
  std::vector<double> p(V);
  double sum = 0, zsum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(row[v] / T);
  for (int64_t v = 0; v < V; ++v) p[v] = std::exp(row[v] / T) / sum;
  double entropy = 0;
  for (int64_t v = 0; v < V; ++v) entropy -= p[v] * std::log(p[v]);
  (void)zsum;
  std::vector<int64_t> count(V, 0);
  for (int64_t i = 0; i < N; ++i) {
    ASSERT_GE(token[i], 0);
    ASSERT_LT(token[i], V);
    count[token[i]]++;
    EXPECT_NEAR(lp[i], std::log(p[token[i]]), 1e-5);
    EXPECT_NEAR(ent[i], entropy, 1e-5);
  }
  for (int64_t v = 0; v < V; ++v) {
    const double sd = std::sqrt(N * p[v] * (1 - p[v]));
    EXPECT_NEAR(double(count[v]), N * p[v], 4 * sd) << "token " << v;
  }
}

// Scoring's reference: log-softmax(z / T) at the target and the entropy, for fp32 logits; a target
// outside the vocabulary gives NaN.
TEST(SamplerCpu, ScoresTheTargetsLogProbAndTheEntropy) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 2.5f, 0.f, 3.f, -2.f, 1.f, 1.f};
  const int64_t V = 5;
  const float T = 0.8f;
  std::vector<int64_t> target = {4, 7};
  std::vector<float> lp(2), ent(2), lse(2);
  score_rows_args a;
  a.logits = logits.data();
  a.bf16 = false;
  a.rows = 2;
  a.vocab = a.ld = V;
  a.temperature = T;
  a.target = target.data();
  a.logprob = lp.data();
  a.entropy = ent.data();
  a.lse = lse.data();
  score_rows_cpu(a);
  double sum = 0, entropy = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(logits[v] / T);
  for (int64_t v = 0; v < V; ++v) {
    const double p = std::exp(logits[v] / T) / sum;
    entropy -= p * std::log(p);
  }
  EXPECT_NEAR(lp[0], logits[4] / T - std::log(sum), 1e-6);
  EXPECT_NEAR(lse[0], std::log(sum), 1e-6);
  EXPECT_NEAR(ent[0], entropy, 1e-6);
  EXPECT_TRUE(std::isnan(lp[1]));
}

TEST(SamplerCpu, KeepsOnlyTokensAtOrAboveTheThreshold) {
  const std::vector<float> row = {1.0f, 2.0f, 0.5f, -1.0f, 2.5f};
  const int64_t V = 5, N = 2000;
  std::vector<float> logits;
  for (int64_t i = 0; i < N; ++i) logits.insert(logits.end(), row.begin(), row.end());
  std::vector<float> temp(N, 1.0f), lp, ent, floor(N, 2.0f);  // top-2: tokens 1 and 4
  std::vector<uint64_t> seed(N, 99);
  std::vector<int64_t> pos(N), token;
  for (int64_t i = 0; i < N; ++i) pos[i] = i;
  auto a = args_for(logits, N, V, temp, seed, pos, token, lp, ent);
  a.min_kept = floor.data();
  sample_rows_cpu(a);
  int64_t ones = 0;
  for (int64_t i = 0; i < N; ++i) {
    ASSERT_TRUE(token[i] == 1 || token[i] == 4) << token[i];
    ones += token[i] == 1;
  }
  // p(1 | {1, 4}) = 1 / (1 + e^0.5) = 0.3775
  EXPECT_NEAR(double(ones) / N, 0.3775, 0.05);
}

}  // namespace
}  // namespace milesrt::kernels
