#pragma once
/// Batched attention over a paged KV cache for the serving path: FlashInfer's paged decode and
/// paged prefill kernels (headers from the pinned flashinfer-python wheel, compiled here for the
/// variants milesrt uses: bf16, head_dim 128, no positional encoding inside the kernel, causal).
/// No ATen here: raw device pointers and a cudaStream_t passed as void*.
///
/// Cache layout (milesrt's kv_cache, "NHD"): per layer K and V are [num_pages * page_size,
/// kv_heads, head_dim], page p holding rows p*page_size .. p*page_size+page_size-1.
/// A batch of sequences is described by FlashInfer's CSR arrays, all int32 on the device:
///   kv_indptr[b+1]     offsets into kv_indices of each sequence's pages,
///   kv_indices[...]    the page ids (milesrt's block tables, concatenated),
///   kv_last_page_len[b] tokens used in each sequence's last page (1..page_size),
///   qo_indptr[b+1]     (prefill) offsets of each sequence's query rows in q.
/// Queries q and outputs o are [rows, qo_heads, head_dim] bf16, row-major. Masking is causal with
/// the queries aligned to the end of the sequence (a chunk over a cached prefix), so decode rows
/// (one query) mix freely with prefill chunks in one prefill call.

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace milesrt::kernels {

struct attention_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// True when this build has the paged attention kernels for `head_dim` (128 today).
bool paged_attention_supported(int head_dim);

struct paged_kv_desc {
  void* k = nullptr;  ///< bf16 [pages * page_size, kv_heads, head_dim]
  void* v = nullptr;
  int page_size = 16;
  int kv_heads = 0;
  int head_dim = 128;
  const int32_t* indptr = nullptr;         ///< device
  const int32_t* indices = nullptr;        ///< device
  const int32_t* last_page_len = nullptr;  ///< device
};

/// Workspace sizes FlashInfer's planners need at most (what its own Python wrapper allocates).
constexpr size_t kAttentionFloatWorkspaceBytes = 128u << 20;
constexpr size_t kAttentionIntWorkspaceBytes = 8u << 20;

/// One planned batch. The plan (host work: split-KV scheduling from the host copy of the
/// indptr arrays, then one async copy of its tables into the int workspace) is made once per
/// engine step and reused by every layer's run.
class paged_attention {
 public:
  /// float_ws: device, kAttentionFloatWorkspaceBytes; int_ws: device, kAttentionIntWorkspaceBytes;
  /// pinned_ws: page-locked host memory of kAttentionIntWorkspaceBytes (rewritten by each plan
  /// and copied asynchronously: do not plan again before the previous plan's copy has run).
  paged_attention(void* float_ws, void* int_ws, void* pinned_ws);

  /// Decode: one query row per sequence. kv_indptr_host: the host copy of kv_indptr.
  /// cuda_graph: plan for replay inside a captured graph (fixed launch shape for `batch`).
  void plan_decode(const int32_t* kv_indptr_host, int batch, int qo_heads, int kv_heads,
                   int head_dim, int page_size, bool cuda_graph, void* stream);
  void run_decode(const void* q, void* o, const paged_kv_desc& kv, int batch, int qo_heads,
                  float sm_scale, void* stream) const;

  /// Prefill (ragged queries; decode rows are sequences with one query).
  void plan_prefill(const int32_t* qo_indptr_host, const int32_t* kv_indptr_host, int batch,
                    int qo_heads, int kv_heads, int head_dim, int page_size, void* stream);
  void run_prefill(const void* q, const int32_t* qo_indptr, void* o, const paged_kv_desc& kv,
                   int batch, int qo_heads, float sm_scale, void* stream) const;

 private:
  void* float_ws_;
  void* int_ws_;
  void* pinned_ws_;
  std::vector<int64_t> decode_plan_, prefill_plan_;
};

/// fp32 reference on the host, same arguments as the kernels but host arrays: q/o are float
/// [rows, qo_heads, head_dim]; k/v are float [pages * page_size, kv_heads, head_dim].
void paged_attention_reference(const float* q, float* o, const float* k, const float* v,
                               const int32_t* qo_indptr, const int32_t* kv_indptr,
                               const int32_t* kv_indices, const int32_t* kv_last_page_len,
                               int batch, int qo_heads, int kv_heads, int head_dim, int page_size,
                               float sm_scale);

}  // namespace milesrt::kernels
