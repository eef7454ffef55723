#pragma once
/// The training forward's element-wise layers on CUDA in bf16 as autograd functions over the
/// kernels of kernels/train (their forwards are the serving path's kernels or their equals, so a
/// token's training log-prob is computed the way the rollout computed it). Elsewhere the model
/// keeps ATen's composite operations.
///
/// Where a weight has an accumulated gradient (w.grad() defined: a parameter of the flat buffer),
/// these functions add the weight's gradient into it themselves, during the backward, and hand
/// autograd none: backward() accumulates as usual, but torch::autograd::grad() with respect to
/// such a weight is not supported (it would get nothing, and w.grad() would change).

#include <ATen/core/Tensor.h>

#include <utility>

namespace milesrt::llm::train_ops {

/// Whether these functions run for tensors on `device` of `dtype`.
bool available(const at::Device& device, at::ScalarType dtype);
/// RMSNorm over the last dimension times w (transformers' rounding).
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps);
/// {h + delta, RMSNorm(h + delta) * w} in one pass (the residual stream and the next block's
/// input); in the backward the stream's gradient and the norm's are summed in the same pass.
std::pair<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& h, const at::Tensor& delta,
                                               const at::Tensor& w, double eps);
/// x [rows, in] times w [out, in] transposed; w's gradient is added into w.grad() by the GEMM
/// itself where w has one (a flat-buffer parameter). `invariant`: the forward is the
/// batch-invariant GEMM (invariant_ops::mm; the backward's GEMMs stay cuBLAS's).
at::Tensor linear(const at::Tensor& x, const at::Tensor& w, bool invariant = false);
/// The rows `ids` of an embedding table; the table's gradient is added into table.grad() in place
/// where it has one.
at::Tensor embedding(const at::Tensor& table, const at::Tensor& ids);
/// rope(RMSNorm(x) * w) of x [T, heads, 128] with the tables [T, 1, 128] (Qwen3's q/k norm and
/// rotary embedding) in one pass, forward and backward.
at::Tensor qk_norm_rope(const at::Tensor& x, const at::Tensor& w, const at::Tensor& cos,
                        const at::Tensor& sin, double eps);
/// Rotary embedding of x [T, heads, d] with the tables [T, 1, d] of its positions.
at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);
/// silu(gate) * up.
at::Tensor silu_mul(const at::Tensor& gate, const at::Tensor& up);

}  // namespace milesrt::llm::train_ops
