#pragma once
/// One AdamW step over flat fp32 master weights in one pass (torch.optim.AdamW's formula, as
/// milesrt::rl::adamw states it): reads the gradient (bf16 or fp32) and the state, writes the
/// master weights, the state, optionally the model's bf16 copy of the weights, and optionally
/// zeroes the gradient, so an optimizer step costs one read and one write of each buffer. CPU
/// reference alike.

#include <cstdint>

namespace milesrt::kernels {

struct adamw_args {
  float* master = nullptr;
  float* exp_avg = nullptr;
  float* exp_avg_sq = nullptr;
  void* grad = nullptr;  ///< [n] bf16 (grad_bf16) or fp32
  bool grad_bf16 = true;
  bool zero_grad = false;            ///< write 0 to the gradient once read
  uint16_t* weights_bf16 = nullptr;  ///< [n] bf16 copy of the master weights to refresh, or null
  const float* grad_coef =
      nullptr;  ///< device scalar the gradient is multiplied by (clipping), or null
  /// Set to 1 (never to 0) when a weight the step writes is not finite: the new master weight,
  /// or its bf16 copy where one is refreshed (which rounds beyond bf16's range to infinity). Null:
  /// not checked. Saves the caller a pass over the weights.
  int32_t* nonfinite = nullptr;
  int64_t n = 0;
  float lr = 0, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0;
  float step_size = 0;  ///< lr / (1 - beta1^t)
  float bc2_sqrt = 1;   ///< sqrt(1 - beta2^t)
};

void adamw_step_cuda(const adamw_args& a, void* stream);
void adamw_step_cpu(const adamw_args& a);

}  // namespace milesrt::kernels
