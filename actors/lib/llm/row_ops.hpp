#pragma once
/// The decoder's batch-invariant building blocks on the CPU (model.hpp says why): row-invariant
/// GEMMs, per-row norms, rotary embeddings and per-position attention, each giving a row the same
/// bits whatever else is in the batch. On CUDA they are the plain operations.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>

namespace milesrt::llm::row_ops {

/// Pads rows to a multiple of 8 (at least 8) with zero rows.
at::Tensor pad_rows(const at::Tensor& x);
/// x [n, in] times w [out, in]^T in calls of exactly 16 rows (the last one padded): MKL's sgemm
/// then computes a row the same way whatever else is in the call.
at::Tensor blocked_mm(const at::Tensor& x, const at::Tensor& w);
/// x [n, in] times w [out, in]^T (plus b): blocked_mm on the CPU, one GEMM on CUDA.
at::Tensor linear_rows(const at::Tensor& x, const at::Tensor& w);
at::Tensor linear_rows(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b);
/// RMSNorm over the last dimension, in fp32 as transformers computes it.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps);
/// The rotary tables of `positions` [n]: cos and sin [n, 1, d] in `dtype`.
std::pair<at::Tensor, at::Tensor> rope_tables(const at::Tensor& positions,
                                              const at::Tensor& inv_freq, at::ScalarType dtype);
/// Rotary embedding of x [n, heads, d] with the tables of its positions.
at::Tensor apply_rope(const at::Tensor& x, const std::pair<at::Tensor, at::Tensor>& table);
/// Attention of the new rows q [n, heads, d] of one sequence at positions start..start+n-1 against
/// keys/values [start+n, kv_heads, d]: on the CPU each position with the same calls and shapes
/// whatever the batch; on CUDA one fused call.
at::Tensor attend(const at::Tensor& q, const at::Tensor& k_all, const at::Tensor& v_all,
                  int64_t start, int64_t kv_heads);

}  // namespace milesrt::llm::row_ops
