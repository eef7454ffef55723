#pragma once
/// Causal attention whose result for a query depends only on that query and its own keys (the
/// batch-invariant attention of the true on-policy mode, docs/design/true-on-policy.md):
/// tensor-core tiles of 16 (query, head) rows walk each row's keys 0..pos in tiles of
/// kInvariantKeyTile, in order, with a base-2 fp32 online softmax and bf16 probabilities for P V,
/// as flash attention's forward does but with no split of the keys; the same code whether the keys
/// sit in packed rows (training) or in the paged cache (serving), and whether the query came in a
/// prefill, a chunk or a decode step. Head size 128, grouped-query heads. Also each query's
/// log-sum-exp of its scaled scores (natural log), in flash attention's [heads, rows] layout, for a
/// backward. No ATen here.

#include <cstdint>

namespace milesrt::kernels {

constexpr int kInvariantKeyTile = 16;
/// Scores are walked in base 2 (scaled by log2(e)); the log-sum-exp comes back in natural log
/// (times ln 2). The kernel and its host reference share these.
constexpr float kInvariantLog2e = 1.4426950408889634f;
constexpr float kInvariantLn2 = 0.6931471805599453f;

struct invariant_attention_args {
  const void* q = nullptr;  ///< [rows, heads, 128] bf16
  const void* k = nullptr;  ///< packed [kv rows, kv_heads, 128] or the cache [slots, ...]
  const void* v = nullptr;  ///< as k
  /// [rows] each query's sequence (null: the row's own index, one query a sequence as in decode;
  /// the kernel then puts a row's query heads in one tile: the same results, fewer key reads)
  const int32_t* seq = nullptr;
  const int32_t* pos = nullptr;  ///< [rows] its position: it attends keys 0..pos of its sequence
  /// Packed keys: key j of sequence s is row kv_start[s] + j (null: paged).
  const int32_t* kv_start = nullptr;
  /// Paged keys: key j of sequence s is slot block_table[first + j / block_size] * block_size +
  /// j % block_size, where first is page_indptr[s] (the serving step's CSR page lists) or, without
  /// page_indptr, s * max_blocks (one padded table row a sequence).
  const int32_t* block_table = nullptr;
  const int32_t* page_indptr = nullptr;
  int64_t max_blocks = 0, block_size = 0;
  void* out = nullptr;   ///< [rows, heads, 128] bf16
  float* lse = nullptr;  ///< [heads, rows] or null
  int64_t rows = 0, heads = 0, kv_heads = 0;
  float scale = 1.f;
};

void invariant_attention_cuda(const invariant_attention_args& a, void* stream);
/// The reference on the host (host pointers): the same online softmax over the same chunks.
void invariant_attention_cpu(const invariant_attention_args& a);

}  // namespace milesrt::kernels
