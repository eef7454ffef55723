#pragma once
/// The batch-invariant operations of the true on-policy mode on CUDA
/// (docs/design/true-on-policy.md): a token's result depends only on its own row (and, in
/// attention, its own keys), never on what else shares the call, so the engine's serving forward
/// and the trainer's training forward give a token the same bits. GEMMs run on kernels/gemm's
/// pinned cuBLASLt algorithm, attention on kernels/attention's invariant kernel (the same code over
/// packed training keys and the paged cache); the attention's backward is flash attention's, fed
/// this forward's output and log-sum-exp, so the trainer differentiates the very forward whose
/// log-probs it reports. bf16 on CUDA with head size 128 only.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace milesrt::llm::invariant_ops {

/// Why the mode cannot run for a model on `device` in `dtype`, with or without LoRA adapters, with
/// heads of `head_dim` (0: not known yet, as in validation) (empty: it can). The one statement of
/// the mode's limits on CUDA: the kernels are bf16, head size 128, and know no adapters.
std::string problem(const at::Device& device, at::ScalarType dtype, bool lora,
                    int64_t head_dim = 0);

/// x [m, k] times w [n, k] transposed -> [m, n] bf16 (contiguous), each row as if alone (no
/// autograd). k must be a multiple of 8.
at::Tensor mm(const at::Tensor& x, const at::Tensor& w);

/// A packed training batch's keys: each row's sequence and position, and the batch's cumulative
/// lengths (each sequence's first row, and flash attention's for the backward).
struct packed_keys {
  at::Tensor seq, pos, cu_seqlens;  ///< int32 on the device
  int64_t max_len = 0;
};
/// The keys of sequences of `lengths` packed in that order, whose cumulative lengths the caller
/// has on the device already (`cu_seqlens`, [sequences + 1] int32; `max_len` the longest).
packed_keys make_packed_keys(const std::vector<int64_t>& lengths, const at::Tensor& cu_seqlens,
                             int64_t max_len);

/// Causal attention of packed sequences: q [T, heads, 128], k and v [T, kv_heads, 128] ->
/// [T, heads, 128]. Differentiable: the backward is flash attention's varlen backward.
at::Tensor packed_attention(const packed_keys& b, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v);

/// A serving step's rows over the paged cache: the same kernel as packed_attention, keys found
/// through the step's CSR page lists (`pages` [n] int32 block ids, `page_indptr` [sequences + 1]);
/// `seq` [rows] int32 each row's sequence (undefined: row r is sequence r, a decode step); `pos`
/// [rows] int32. k_cache, v_cache [slots, kv_heads, 128]. No autograd.
at::Tensor paged_attention(const at::Tensor& q, const at::Tensor& k_cache,
                           const at::Tensor& v_cache, const at::Tensor& pages,
                           const at::Tensor& page_indptr, const at::Tensor& seq,
                           const at::Tensor& pos, int64_t block_size);

}  // namespace milesrt::llm::invariant_ops
