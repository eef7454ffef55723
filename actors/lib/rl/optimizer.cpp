#include "actors/lib/rl/optimizer.hpp"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "actors/lib/llm/device.hpp"
#include "actors/lib/rl/grad_norm.hpp"
#include "kernels/optim/adamw.hpp"

namespace milesrt::rl {
namespace {

constexpr char magic[8] = {'M', 'R', 'A', 'D', 'A', 'M', 'W', '\0'};
constexpr uint32_t format_version = 1;
constexpr size_t header_bytes = sizeof(magic) + sizeof(uint32_t) + 2 * sizeof(uint64_t);

void check_options(const adamw_options& o) {
  if (o.schedule != "constant" && o.schedule != "cosine")
    throw std::invalid_argument("adamw: unknown lr schedule '" + o.schedule +
                                "' (allowed: constant, cosine)");
  if (o.schedule == "cosine" && o.total_steps <= o.warmup_steps)
    throw std::invalid_argument("adamw: cosine schedule needs total_steps (" +
                                std::to_string(o.total_steps) + ") > warmup_steps (" +
                                std::to_string(o.warmup_steps) + ")");
}

}  // namespace

double lr_at(const adamw_options& o, uint64_t step) {
  check_options(o);
  if (step < o.warmup_steps) return o.lr * static_cast<double>(step) / o.warmup_steps;
  if (o.schedule == "constant") return o.lr;
  if (step >= o.total_steps) return o.min_lr;
  const double progress = static_cast<double>(step - o.warmup_steps) /
                          static_cast<double>(o.total_steps - o.warmup_steps);
  return o.min_lr + (o.lr - o.min_lr) * 0.5 * (1 + std::cos(std::acos(-1.0) * progress));
}

adamw::adamw(adamw_options o, const at::Tensor& master) : options_(std::move(o)) {
  check_options(options_);
  TORCH_CHECK(master.defined() && master.scalar_type() == at::kFloat,
              "adamw: master parameters must be an fp32 tensor, got ",
              master.defined() ? c10::toString(master.scalar_type()) : "undefined");
  exp_avg_ = at::zeros_like(master, at::MemoryFormat::Contiguous);
  exp_avg_sq_ = at::zeros_like(master, at::MemoryFormat::Contiguous);
}

adamw::step_info adamw::step(at::Tensor& master, const at::Tensor& grad, const at::Tensor& weights,
                             bool zero_grad) {
  TORCH_CHECK(master.sizes() == exp_avg_.sizes() && master.device() == exp_avg_.device() &&
                  master.scalar_type() == at::kFloat,
              "adamw::step: master must be fp32 ", exp_avg_.sizes(), " on ", exp_avg_.device(),
              ", got ", master.scalar_type(), " ", master.sizes(), " on ", master.device());
  TORCH_CHECK(grad.defined() && grad.sizes() == master.sizes(), "adamw::step: grad must be ",
              master.sizes(), ", got ", grad.defined() ? grad.sizes() : at::IntArrayRef{});
  c10::NoGradGuard no_grad;
  // The same bits as a ZeRO-1 rank's norm of its slices (grad_norm.hpp), on any thread count.
  const auto norm = global_l2_norm(grad).to(master.device());
  return step_with_norm(master, grad, norm, weights, zero_grad);
}

adamw::step_info adamw::step_with_norm(at::Tensor& master, const at::Tensor& grad,
                                       const at::Tensor& norm, const at::Tensor& weights,
                                       bool zero_grad) {
  TORCH_CHECK(master.sizes() == exp_avg_.sizes() && grad.defined() &&
                  grad.sizes() == master.sizes() && norm.defined() && norm.numel() == 1,
              "adamw::step_with_norm: master and grad must be ", exp_avg_.sizes(),
              " and the norm one value");
  c10::NoGradGuard no_grad;
  const auto& o = options_;
  step_info info;
  const uint64_t t = steps_ + 1;
  info.lr = lr_at(o, t);
  if (master.is_cuda()) return step_fused(master, grad, norm, t, info, weights, zero_grad);
  auto g = grad.to(master.device(), at::kFloat);
  info.grad_norm = norm.item<double>();
  if (!std::isfinite(info.grad_norm)) {
    info.skipped = true;
    if (zero_grad) grad.zero_();
    return info;
  }
  if (o.grad_clip > 0) {
    // As clip_grad_norm_ (which always scales, by at most 1); a copy: the caller's grad stays.
    const auto coef = (o.grad_clip / (norm + 1e-6)).clamp_max(1.0);
    g = g * coef;
  }
  // torch.optim.AdamW, _single_tensor_adam with decoupled weight decay.
  master.mul_(1 - info.lr * o.weight_decay);
  exp_avg_.lerp_(g, 1 - o.beta1);
  exp_avg_sq_.mul_(o.beta2).addcmul_(g, g, 1 - o.beta2);
  g = at::Tensor();  // free the copy before the denominator is allocated
  const double bias_correction1 = 1 - std::pow(o.beta1, static_cast<double>(t));
  const double bias_correction2 = 1 - std::pow(o.beta2, static_cast<double>(t));
  const double step_size = info.lr / bias_correction1;
  const auto denom = (exp_avg_sq_.sqrt() / std::sqrt(bias_correction2)).add_(o.eps);
  master.addcdiv_(exp_avg_, denom, -step_size);
  steps_ = t;
  if (zero_grad) grad.zero_();
  if (weights.defined() && !weights.is_alias_of(master)) weights.copy_(master);
  return info;
}

adamw::step_info adamw::step_fused(at::Tensor& master, const at::Tensor& grad,
                                   const at::Tensor& norm, uint64_t t, step_info info,
                                   const at::Tensor& weights, bool zero_grad) {
  // On the GPU: one pass of kernels/optim (the same formula) reading the gradient in its own dtype
  // and writing the master weights, the state, the model's bf16 weights and a zeroed gradient. The
  // norm is read once (the step's only host synchronisation); the clipping factor stays on the
  // device.
  const auto& o = options_;
  info.grad_norm = norm.item<double>();
  if (!std::isfinite(info.grad_norm)) {
    info.skipped = true;
    if (zero_grad) grad.zero_();
    return info;
  }
  TORCH_CHECK(grad.is_contiguous() && grad.device() == master.device() &&
                  (grad.scalar_type() == at::kFloat || grad.scalar_type() == at::kBFloat16),
              "adamw::step: on CUDA the gradient must be a contiguous fp32 or bf16 tensor on the "
              "master's device");
  at::Tensor coef;
  if (o.grad_clip > 0) coef = (o.grad_clip / (norm + 1e-6)).clamp_max(1.0);
  kernels::adamw_args a;
  a.master = master.data_ptr<float>();
  a.exp_avg = exp_avg_.data_ptr<float>();
  a.exp_avg_sq = exp_avg_sq_.data_ptr<float>();
  a.grad = const_cast<void*>(grad.data_ptr());
  a.grad_bf16 = grad.scalar_type() == at::kBFloat16;
  a.zero_grad = zero_grad;
  const bool refresh = weights.defined() && !weights.is_alias_of(master);
  if (refresh) {
    TORCH_CHECK(weights.scalar_type() == at::kBFloat16 && weights.is_contiguous() &&
                    weights.numel() == master.numel(),
                "adamw::step: the weights to refresh must be a contiguous bf16 tensor of the "
                "master's size");
    a.weights_bf16 = static_cast<uint16_t*>(weights.data_ptr());
  }
  a.grad_coef = coef.defined() ? coef.data_ptr<float>() : nullptr;
  info.nonfinite = at::zeros({1}, master.options().dtype(at::kInt));
  a.nonfinite = info.nonfinite.data_ptr<int32_t>();
  a.n = master.numel();
  a.lr = static_cast<float>(info.lr);
  a.beta1 = static_cast<float>(o.beta1);
  a.beta2 = static_cast<float>(o.beta2);
  a.eps = static_cast<float>(o.eps);
  a.weight_decay = static_cast<float>(o.weight_decay);
  a.step_size = static_cast<float>(info.lr / (1 - std::pow(o.beta1, static_cast<double>(t))));
  a.bc2_sqrt = static_cast<float>(std::sqrt(1 - std::pow(o.beta2, static_cast<double>(t))));
  kernels::adamw_step_cuda(a, llm::current_cuda_stream());
  steps_ = t;
  return info;
}

std::vector<uint8_t> adamw::save() const {
  const auto m = exp_avg_.to(at::kCPU).contiguous();
  const auto v = exp_avg_sq_.to(at::kCPU).contiguous();
  const uint64_t n = static_cast<uint64_t>(m.numel());
  std::vector<uint8_t> out(header_bytes + 2 * n * sizeof(float));
  uint8_t* p = out.data();
  auto put = [&p](const void* src, size_t bytes) {
    if (bytes) std::memcpy(p, src, bytes);
    p += bytes;
  };
  put(magic, sizeof(magic));
  put(&format_version, sizeof(format_version));
  put(&steps_, sizeof(steps_));
  put(&n, sizeof(n));
  put(m.data_ptr<float>(), n * sizeof(float));
  put(v.data_ptr<float>(), n * sizeof(float));
  return out;
}

void adamw::load(const std::vector<uint8_t>& bytes) {
  auto fail = [](const std::string& what) { throw std::runtime_error("adamw::load: " + what); };
  if (bytes.size() < header_bytes)
    fail("state is " + std::to_string(bytes.size()) + " bytes, shorter than its " +
         std::to_string(header_bytes) + "-byte header");
  const uint8_t* p = bytes.data();
  if (std::memcmp(p, magic, sizeof(magic)) != 0) fail("not an AdamW state (bad magic)");
  uint32_t version;
  uint64_t steps, n;
  std::memcpy(&version, p + 8, sizeof(version));
  std::memcpy(&steps, p + 12, sizeof(steps));
  std::memcpy(&n, p + 20, sizeof(n));
  if (version != format_version)
    fail("format version " + std::to_string(version) + ", expected " +
         std::to_string(format_version));
  if (n != static_cast<uint64_t>(exp_avg_.numel()))
    fail("state has " + std::to_string(n) + " elements but the parameters have " +
         std::to_string(exp_avg_.numel()));
  if (bytes.size() != header_bytes + 2 * n * sizeof(float))
    fail("state is " + std::to_string(bytes.size()) + " bytes, expected " +
         std::to_string(header_bytes + 2 * n * sizeof(float)) + " for " + std::to_string(n) +
         " elements");
  auto read = [&](size_t offset) {
    auto cpu = at::empty({static_cast<int64_t>(n)}, at::kFloat);
    if (n) std::memcpy(cpu.data_ptr<float>(), p + offset, n * sizeof(float));
    return cpu.view(exp_avg_.sizes());
  };
  c10::NoGradGuard no_grad;
  exp_avg_.copy_(read(header_bytes));
  exp_avg_sq_.copy_(read(header_bytes + n * sizeof(float)));
  steps_ = steps;
}

}  // namespace milesrt::rl
