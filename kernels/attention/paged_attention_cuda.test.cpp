#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/attention/paged_attention.hpp"
#include "kernels/device.hpp"
#ifdef MILESRT_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace milesrt::kernels {
namespace {

#ifdef MILESRT_HAVE_CUDA
uint16_t to_bf16(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  b += 0x7fff + ((b >> 16) & 1);
  return uint16_t(b >> 16);
}
float from_bf16(uint16_t h) {
  uint32_t b = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
template <typename T>
T* to_device(const std::vector<T>& v) {
  T* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, std::max<size_t>(1, v.size()) * sizeof(T)), cudaSuccess);
  if (!v.empty()) {
    EXPECT_EQ(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  return d;
}

/// A batch of sequences over a scattered paged cache: kv_len[b] tokens each, of which the last
/// q_len[b] are queries (q_len 1 = a decode row). Runs the kernel (prefill or decode) and the
/// fp32 reference on the same bf16 values; returns the largest absolute difference.
double max_error(const std::vector<int>& kv_len, const std::vector<int>& q_len, bool decode,
                 int qo_heads, int kv_heads, int page_size, uint32_t seed) {
  const int D = 128, B = int(kv_len.size());
  std::mt19937 gen(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  // Pages handed out in a shuffled order, so every table is scattered over the pool.
  int total_pages = 0;
  for (int l : kv_len) total_pages += (l + page_size - 1) / page_size;
  const int pool = total_pages + 7;
  std::vector<int32_t> free_pages(pool);
  std::iota(free_pages.begin(), free_pages.end(), 0);
  std::shuffle(free_pages.begin(), free_pages.end(), gen);
  std::vector<int32_t> indptr{0}, indices, last, qo_indptr{0};
  for (int b = 0; b < B; ++b) {
    const int pages = (kv_len[b] + page_size - 1) / page_size;
    for (int p = 0; p < pages; ++p) indices.push_back(free_pages[indices.size()]);
    indptr.push_back(int32_t(indices.size()));
    last.push_back(kv_len[b] - (pages - 1) * page_size);
    qo_indptr.push_back(qo_indptr.back() + q_len[b]);
  }
  const int rows = qo_indptr.back();
  const size_t cache_elems = size_t(pool) * page_size * kv_heads * D;
  std::vector<uint16_t> k(cache_elems), v(cache_elems), q(size_t(rows) * qo_heads * D);
  for (auto& x : k) x = to_bf16(nd(gen));
  for (auto& x : v) x = to_bf16(nd(gen));
  for (auto& x : q) x = to_bf16(nd(gen));
  std::vector<float> kf(cache_elems), vf(cache_elems), qf(q.size()), want(q.size());
  for (size_t i = 0; i < cache_elems; ++i) kf[i] = from_bf16(k[i]), vf[i] = from_bf16(v[i]);
  for (size_t i = 0; i < q.size(); ++i) qf[i] = from_bf16(q[i]);
  const float scale = 1.0f / std::sqrt(float(D));
  paged_attention_reference(qf.data(), want.data(), kf.data(), vf.data(), qo_indptr.data(),
                            indptr.data(), indices.data(), last.data(), B, qo_heads, kv_heads, D,
                            page_size, scale);

  void *fws, *iws, *pws;
  EXPECT_EQ(cudaMalloc(&fws, kAttentionFloatWorkspaceBytes), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&iws, kAttentionIntWorkspaceBytes), cudaSuccess);
  EXPECT_EQ(cudaMallocHost(&pws, kAttentionIntWorkspaceBytes), cudaSuccess);
  auto *dk = to_device(k), *dv = to_device(v), *dq = to_device(q);
  uint16_t* dout;
  cudaMalloc(&dout, q.size() * 2);
  cudaMemset(dout, 0, q.size() * 2);
  auto *d_indptr = to_device(indptr), *d_indices = to_device(indices), *d_last = to_device(last),
       *d_qo = to_device(qo_indptr);
  paged_attention attn(fws, iws, pws);
  paged_kv_desc kv{dk, dv, page_size, kv_heads, D, d_indptr, d_indices, d_last};
  if (decode) {
    attn.plan_decode(indptr.data(), B, qo_heads, kv_heads, D, page_size, false, nullptr);
    attn.run_decode(dq, dout, kv, B, qo_heads, scale, nullptr);
  } else {
    attn.plan_prefill(qo_indptr.data(), indptr.data(), B, qo_heads, kv_heads, D, page_size,
                      nullptr);
    attn.run_prefill(dq, d_qo, dout, kv, B, qo_heads, scale, nullptr);
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint16_t> got(q.size());
  cudaMemcpy(got.data(), dout, got.size() * 2, cudaMemcpyDeviceToHost);
  double err = 0;
  for (size_t i = 0; i < got.size(); ++i)
    err = std::max(err, double(std::fabs(from_bf16(got[i]) - want[i])));
  for (void* p : {fws, iws, (void*)dk, (void*)dv, (void*)dq, (void*)dout, (void*)d_indptr,
                  (void*)d_indices, (void*)d_last, (void*)d_qo})
    cudaFree(p);
  cudaFreeHost(pws);
  return err;
}
#endif

// Outputs are convex combinations of bf16 values of size ~1: bf16 output rounding is 2^-8
// relative, so 2e-2 absolute bounds the kernel's error (a wrong mask or page gives ~0.5).
constexpr double kTolerance = 2e-2;

TEST(PagedAttentionCuda, DecodeMatchesTheReferenceOnRaggedScatteredBatches) {
#ifndef MILESRT_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA kernels";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  for (auto [qh, kvh] : {std::pair{16, 8}, std::pair{32, 8}, std::pair{8, 8}}) {
    std::vector<int> kv_len = {1, 15, 16, 17, 100, 383, 1024, 2};
    std::vector<int> q_len(kv_len.size(), 1);
    EXPECT_LT(max_error(kv_len, q_len, true, qh, kvh, 16, 1), kTolerance) << qh << "/" << kvh;
  }
  // Many sequences (the split-KV path is off) and one long one (split-KV on).
  std::vector<int> many(256, 0), one = {9000};
  for (size_t i = 0; i < many.size(); ++i) many[i] = 1 + int(i * 37 % 700);
  EXPECT_LT(max_error(many, std::vector<int>(many.size(), 1), true, 16, 8, 16, 2), kTolerance);
  EXPECT_LT(max_error(one, {1}, true, 16, 8, 16, 3), kTolerance);
#endif
}

TEST(PagedAttentionCuda, PrefillMatchesTheReferenceWithChunksOverCachedPrefixesAndDecodeRows) {
#ifndef MILESRT_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA kernels";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible";
  // Whole prompts, chunks over a cached prefix, and decode rows in one batch; short (CTA 16),
  // medium (64) and long (128) average query lengths.
  EXPECT_LT(max_error({7, 40, 300, 33, 1}, {7, 20, 1, 33, 1}, false, 16, 8, 16, 4), kTolerance);
  EXPECT_LT(max_error({128, 128, 129, 64}, {128, 100, 64, 64}, false, 16, 8, 16, 5), kTolerance);
  EXPECT_LT(max_error({1500, 700}, {1500, 300}, false, 32, 8, 16, 6), kTolerance);
  EXPECT_LT(max_error({5, 6, 7, 8}, {1, 1, 1, 1}, false, 16, 8, 16, 7), kTolerance);
#endif
}

}  // namespace
}  // namespace milesrt::kernels
