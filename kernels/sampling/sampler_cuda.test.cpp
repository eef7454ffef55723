#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda_testing.hpp"
#include "kernels/device.hpp"
#include "kernels/sampling/sampler.hpp"

namespace milesrt::kernels {
namespace {

#ifdef MILESRT_HAVE_CUDA
using testing::dev;
using testing::host;

struct result {
  std::vector<int64_t> token;
  std::vector<float> logprob, entropy;
};

/// Runs rows of bf16 logits [rows, vocab] through the GPU sampler (gpu) or the CPU reference.
result run(bool gpu, const std::vector<uint16_t>& logits, int64_t rows, int64_t vocab,
           const std::vector<float>& temp, const std::vector<uint64_t>& seed,
           const std::vector<int64_t>& pos, const std::vector<float>* floor) {
  result r;
  r.token.assign(rows, -1);
  r.logprob.assign(rows, 0);
  r.entropy.assign(rows, 0);
  sample_rows_args a;
  a.bf16 = true;
  a.rows = rows;
  a.vocab = vocab;
  a.ld = vocab;
  if (!gpu) {
    a.logits = logits.data();
    a.temperature = temp.data();
    a.min_kept = floor ? floor->data() : nullptr;
    a.seed = seed.data();
    a.position = pos.data();
    a.token = r.token.data();
    a.logprob = r.logprob.data();
    a.entropy = r.entropy.data();
    sample_rows_cpu(a);
    return r;
  }
  auto* dl = dev(logits);
  auto* dt = dev(temp);
  auto* ds = dev(seed);
  auto* dp = dev(pos);
  float* df = floor ? dev(*floor) : nullptr;
  int64_t* tok;
  float *lp, *ent;
  void* ws;
  cudaMalloc(&tok, rows * 8);
  cudaMalloc(&lp, rows * 4);
  cudaMalloc(&ent, rows * 4);
  cudaMalloc(&ws, sample_rows_workspace_bytes(rows, vocab));
  a.workspace = ws;
  a.logits = dl;
  a.temperature = dt;
  a.min_kept = df;
  a.seed = ds;
  a.position = dp;
  a.token = tok;
  a.logprob = lp;
  a.entropy = ent;
  sample_rows_cuda(a, nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  r.token = host(tok, rows);
  r.logprob = host(lp, rows);
  r.entropy = host(ent, rows);
  for (void* p : {(void*)dl, (void*)dt, (void*)ds, (void*)dp, (void*)df, (void*)tok, (void*)lp,
                  (void*)ent, ws})
    if (p) cudaFree(p);
  return r;
}

std::vector<uint16_t> random_logits(int64_t rows, int64_t vocab, uint32_t seed, float scale) {
  return testing::random_bf16(size_t(rows * vocab), seed, 0.f, scale);
}
#endif

// The device sampler picks exactly the reference's tokens (same Philox numbers, same z), with
// log-probs and entropies within float rounding of the reference's double sums; also with a
// top-k style threshold. Vocabularies of one slice, of a tail slice (Qwen3's 151,936) and of
// exactly two.
TEST(SamplerCuda, MatchesTheCpuReference) {
#ifndef MILESRT_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA kernels";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  for (const int64_t vocab : {int64_t(1000), int64_t(151936), int64_t(16384)}) {
    SCOPED_TRACE("vocab " + std::to_string(vocab));
    const int64_t rows = 37;
    auto logits = random_logits(rows, vocab, 5, 3.0f);
    std::vector<float> temp(rows), floor(rows);
    std::vector<uint64_t> seed(rows);
    std::vector<int64_t> pos(rows);
    for (int64_t r = 0; r < rows; ++r) {
      temp[r] = 0.6f + 0.05f * r;
      seed[r] = 1000003ull * r + 17;
      pos[r] = 5 * r + 1;
    }
    // Thresholds as top-k 20 sets them: the 20th largest z of each row (a kept token's z).
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> z(vocab);
      for (int64_t i = 0; i < vocab; ++i) {
        uint32_t b = uint32_t(logits[r * vocab + i]) << 16;
        float f;
        std::memcpy(&f, &b, 4);
        z[i] = f / temp[r];
      }
      std::nth_element(z.begin(), z.begin() + 19, z.end(), std::greater<float>());
      floor[r] = z[19];
    }
    for (const std::vector<float>* f :
         {(const std::vector<float>*)nullptr, (const std::vector<float>*)&floor}) {
      auto want = run(false, logits, rows, vocab, temp, seed, pos, f);
      auto got = run(true, logits, rows, vocab, temp, seed, pos, f);
      for (int64_t r = 0; r < rows; ++r) {
        EXPECT_EQ(got.token[r], want.token[r]) << "row " << r;
        EXPECT_NEAR(got.logprob[r], want.logprob[r], 2e-4) << "row " << r;
        EXPECT_NEAR(got.entropy[r], want.entropy[r], 2e-4) << "row " << r;
      }
    }
  }
#endif
}

// A request's samples depend on its seed and positions only: the same logits placed at different
// rows of batches of 1, 8 and 256 give the same tokens and log-probs, bit for bit.
TEST(SamplerCuda, SamplesDoNotDependOnTheBatchRow) {
#ifndef MILESRT_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA kernels";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  const int64_t vocab = 151936;
  auto mine = random_logits(1, vocab, 9, 2.0f);
  std::vector<int64_t> tokens_at;
  std::vector<float> lps;
  for (int64_t rows : {1, 8, 256}) {
    auto logits = random_logits(rows, vocab, 10 + uint32_t(rows), 2.0f);
    const int64_t at = rows / 2;
    std::copy(mine.begin(), mine.end(), logits.begin() + at * vocab);
    std::vector<float> temp(rows, 1.0f);
    std::vector<uint64_t> seed(rows);
    std::vector<int64_t> pos(rows);
    for (int64_t r = 0; r < rows; ++r) {
      seed[r] = 77 + r;
      pos[r] = r;
    }
    seed[at] = 4242;
    pos[at] = 300;
    auto got = run(true, logits, rows, vocab, temp, seed, pos, nullptr);
    tokens_at.push_back(got.token[at]);
    lps.push_back(got.logprob[at]);
  }
  EXPECT_EQ(tokens_at[0], tokens_at[1]);
  EXPECT_EQ(tokens_at[0], tokens_at[2]);
  EXPECT_EQ(lps[0], lps[1]);
  EXPECT_EQ(lps[0], lps[2]);
#endif
}

// Scoring (the trainer's log-probs): the log-prob of the token the sampler drew equals the one it
// recorded, bit for bit, at any batch row; entropies equal too; and every row, given any target,
// matches the CPU reference within float rounding (lse too).
TEST(SamplerCuda, ScoringATokenGivesTheSamplersLogProbBitForBit) {
#ifndef MILESRT_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA kernels";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  for (const int64_t vocab : {int64_t(1000), int64_t(151936)}) {
    SCOPED_TRACE("vocab " + std::to_string(vocab));
    const int64_t rows = 21;
    const float t = 0.7f;
    auto logits = random_logits(rows, vocab, 31, 3.0f);
    std::vector<float> temp(rows, t);
    std::vector<uint64_t> seed(rows);
    std::vector<int64_t> pos(rows);
    for (int64_t r = 0; r < rows; ++r) {
      seed[r] = 99 + 7 * r;
      pos[r] = 3 * r;
    }
    const auto drawn = run(true, logits, rows, vocab, temp, seed, pos, nullptr);
    // Score the drawn tokens with the rows in reverse order (another batch layout).
    std::vector<uint16_t> reversed(logits.size());
    std::vector<int64_t> target(rows);
    for (int64_t r = 0; r < rows; ++r) {
      std::copy(logits.begin() + r * vocab, logits.begin() + (r + 1) * vocab,
                reversed.begin() + (rows - 1 - r) * vocab);
      target[rows - 1 - r] = drawn.token[r];
    }
    score_rows_args a;
    a.rows = rows;
    a.vocab = a.ld = vocab;
    a.temperature = t;
    auto* dl = dev(reversed);
    auto* dt = dev(target);
    float *lp, *ent, *lse;
    void* ws;
    cudaMalloc(&lp, rows * 4);
    cudaMalloc(&ent, rows * 4);
    cudaMalloc(&lse, rows * 4);
    cudaMalloc(&ws, sample_rows_workspace_bytes(rows, vocab));
    a.logits = dl;
    a.target = dt;
    a.logprob = lp;
    a.entropy = ent;
    a.lse = lse;
    a.workspace = ws;
    score_rows_cuda(a, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto got_lp = host(lp, rows), got_ent = host(ent, rows), got_lse = host(lse, rows);
    std::vector<float> ref_lp(rows), ref_ent(rows), ref_lse(rows);
    a.logits = reversed.data();
    a.target = target.data();
    a.logprob = ref_lp.data();
    a.entropy = ref_ent.data();
    a.lse = ref_lse.data();
    score_rows_cpu(a);
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_EQ(got_lp[rows - 1 - r], drawn.logprob[r]) << "row " << r;
      EXPECT_EQ(got_ent[rows - 1 - r], drawn.entropy[r]) << "row " << r;
      EXPECT_NEAR(got_lp[r], ref_lp[r], 2e-4) << "row " << r;
      EXPECT_NEAR(got_ent[r], ref_ent[r], 2e-4) << "row " << r;
      EXPECT_NEAR(got_lse[r], ref_lse[r], 2e-4) << "row " << r;
    }
    for (void* p : {(void*)dl, (void*)dt, (void*)lp, (void*)ent, (void*)lse, ws}) cudaFree(p);
  }
#endif
}

}  // namespace
}  // namespace milesrt::kernels
