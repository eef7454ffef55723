#pragma once
/// The training forward's element-wise layers on CUDA in bf16 as autograd functions over the
/// kernels of kernels/train (their forwards are the serving path's kernels or their equals, so a
/// token's training log-prob is computed the way the rollout computed it). Elsewhere the model
/// keeps ATen's composite operations.

#include <ATen/core/Tensor.h>

namespace milesrt::llm::train_ops {

/// Whether these functions run for tensors on `device` of `dtype`.
bool available(const at::Device& device, at::ScalarType dtype);
/// RMSNorm over the last dimension times w (transformers' rounding).
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps);
/// Rotary embedding of x [T, heads, d] with the tables [T, 1, d] of its positions.
at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);
/// silu(gate) * up.
at::Tensor silu_mul(const at::Tensor& gate, const at::Tensor& up);

}  // namespace milesrt::llm::train_ops
