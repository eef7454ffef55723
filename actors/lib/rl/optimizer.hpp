#pragma once
/// AdamW over one flat fp32 parameter buffer (the model keeps all its parameters in one flat
/// tensor and its gradient in another), with global-norm clipping, a warmup + constant/cosine
/// learning-rate schedule, and a checkpointable state.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace milesrt::rl {

struct adamw_options {
  double lr = 1e-5, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  double grad_clip = 1.0;  // max global L2 norm; 0 = off
  uint32_t warmup_steps = 0;
  std::string schedule = "constant";  // or "cosine"
  double min_lr = 0;
  uint64_t total_steps = 0;  // cosine: lr reaches min_lr here (must exceed warmup_steps)
};

/// The learning rate of 1-based optimizer step `step`: linear warmup lr*step/warmup_steps (from
/// lr/warmup_steps at step 1 to lr at step warmup_steps), then lr ("constant") or
/// min_lr + (lr - min_lr) * 0.5 * (1 + cos(pi * (step - warmup) / (total - warmup))) ("cosine",
/// min_lr from total_steps on). An unknown schedule, or cosine with total_steps <= warmup_steps,
/// throws std::invalid_argument.
double lr_at(const adamw_options& o, uint64_t step);

class adamw {
 public:
  /// master: the flat fp32 parameters, any device; the state lives beside it. Throws
  /// std::invalid_argument for options lr_at would reject.
  adamw(adamw_options o, const at::Tensor& master);

  struct step_info {
    double grad_norm = 0;  // global L2 norm of the gradient, before clipping
    double lr = 0;         // the learning rate of this step
    bool skipped = false;  // non-finite gradient: no update, state and step count untouched
    /// On CUDA: a device int32 the step set to 1 if a weight it wrote is not finite (so the
    /// caller need not read the weights again); undefined elsewhere.
    at::Tensor nonfinite;
  };
  /// One update of `master` in place (under a no-grad guard) from `grad` (same shape; not
  /// modified): clip by global norm (torch.nn.utils.clip_grad_norm_: scale by
  /// min(1, grad_clip / (norm + 1e-6))), then torch.optim.AdamW's single-tensor update exactly:
  /// p *= 1 - lr*wd; m = lerp(m, g, 1-beta1); v = beta2*v + (1-beta2)*g*g;
  /// p -= lr/(1-beta1^t) * m / (sqrt(v)/sqrt(1-beta2^t) + eps).
  /// `weights` (optional): a bf16 copy of the parameters refreshed from the master weights after a
  /// step that was not skipped; `zero_grad`: the gradient is zeroed once read (skipped or not).
  /// On CUDA the update is one pass of kernels/optim/adamw (the gradient read in its own dtype,
  /// fp32 or bf16, the clipping factor kept on the device): equal to the CPU's within rounding.
  step_info step(at::Tensor& master, const at::Tensor& grad, const at::Tensor& weights = {},
                 bool zero_grad = false);
  /// The same update with the gradient's global L2 norm given (a 0-dim fp32 tensor on the master's
  /// device): a rank that holds one shard of the parameters (ZeRO-1) steps its shard with the norm
  /// of the whole gradient, summed over the ranks.
  step_info step_with_norm(at::Tensor& master, const at::Tensor& grad, const at::Tensor& norm,
                           const at::Tensor& weights = {}, bool zero_grad = false);
  uint64_t steps() const { return steps_; }

  /// State for checkpoints: step count + exp_avg + exp_avg_sq; load(save()) is bitwise exact.
  std::vector<uint8_t> save() const;
  /// Throws std::runtime_error naming what is wrong (magic, version, size, element count).
  void load(const std::vector<uint8_t>& bytes);

  const at::Tensor& exp_avg() const { return exp_avg_; }
  const at::Tensor& exp_avg_sq() const { return exp_avg_sq_; }
  const adamw_options& options() const { return options_; }

 private:
  /// The CUDA update: one pass of kernels/optim/adamw.
  step_info step_fused(at::Tensor& master, const at::Tensor& grad, const at::Tensor& norm,
                       uint64_t t, step_info info, const at::Tensor& weights, bool zero_grad);

  adamw_options options_;
  at::Tensor exp_avg_, exp_avg_sq_;
  uint64_t steps_ = 0;
};

}  // namespace milesrt::rl
