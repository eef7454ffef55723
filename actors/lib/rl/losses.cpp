#include "actors/lib/rl/losses.hpp"

#include <ATen/ATen.h>

#include <stdexcept>
#include <utility>

#include "actors/lib/rl/tensor_util.hpp"

namespace milesrt::rl {
namespace {

template <typename E, size_t K>
E parse_enum(const std::string& what, const std::string& name,
             const std::pair<const char*, E> (&table)[K]) {
  std::string allowed;
  for (const auto& [n, e] : table) {
    if (name == n) return e;
    allowed += allowed.empty() ? "" : ", ";
    allowed += n;
  }
  throw std::invalid_argument("unknown " + what + " '" + name + "' (allowed: " + allowed + ")");
}

template <typename E, size_t K>
const char* name_of(E e, const std::pair<const char*, E> (&table)[K]) {
  for (const auto& [n, v] : table)
    if (v == e) return n;
  return "?";
}

const std::pair<const char*, kl_estimator> kl_names[] = {{"none", kl_estimator::none},
                                                         {"k1", kl_estimator::k1},
                                                         {"k2", kl_estimator::k2},
                                                         {"k3", kl_estimator::k3},
                                                         {"low_var_kl", kl_estimator::k3}};
const std::pair<const char*, aggregation> aggregation_names[] = {
    {"token_mean", aggregation::token_mean},
    {"seq_mean_token_sum", aggregation::seq_mean_token_sum},
    {"seq_mean_token_mean", aggregation::seq_mean_token_mean},
    {"constant", aggregation::constant}};

}  // namespace

kl_estimator parse_kl(const std::string& name) {
  return parse_enum("KL estimator", name, kl_names);
}
const char* to_string(kl_estimator k) { return name_of(k, kl_names); }
aggregation parse_aggregation(const std::string& name) {
  return parse_enum("loss aggregation", name, aggregation_names);
}
const char* to_string(aggregation a) { return name_of(a, aggregation_names); }

at::Tensor kl_per_token(const at::Tensor& logp, const at::Tensor& ref, kl_estimator k) {
  switch (k) {
    case kl_estimator::none:
      return at::zeros_like(logp);
    case kl_estimator::k1:
      return logp - ref;
    case kl_estimator::k2:
      return 0.5 * (logp - ref).square();
    case kl_estimator::k3: {
      const auto d = ref - logp;
      return at::exp(d) - 1 - d;
    }
  }
  TORCH_CHECK(false, "kl_per_token: bad estimator");
}

at::Tensor distill_per_token(const at::Tensor& logp, const at::Tensor& teacher, kl_estimator k) {
  if (k == kl_estimator::k1) return (logp - teacher).detach() * logp;
  return kl_per_token(logp, teacher, k);
}

at::Tensor sft_loss(const at::Tensor& logprobs, const at::Tensor& mask, double global_tokens) {
  TORCH_CHECK(logprobs.defined() && logprobs.dim() == 1, "sft_loss: logprobs must be 1-D");
  check_1d(mask, "mask", logprobs.size(0), "sft_loss");
  const auto dt = math_type(logprobs);
  const auto keep = mask.to(logprobs.device()) > 0;
  const auto x = at::where(keep, logprobs.to(dt), 0.0);
  const auto norm = global_tokens > 0 ? at::scalar_tensor(global_tokens, x.options())
                                      : keep.to(dt).sum().clamp_min(1);
  return -x.sum() / norm;
}

at::Tensor value_loss(const at::Tensor& values, const at::Tensor& old_values,
                      const at::Tensor& returns, const at::Tensor& mask, double clip,
                      double global_tokens) {
  const char* fn = "value_loss";
  TORCH_CHECK(values.defined() && values.dim() == 1, fn, ": values must be 1-D");
  const int64_t N = values.size(0);
  check_1d(returns, "returns", N, fn);
  check_1d(mask, "mask", N, fn);
  if (clip > 0) check_1d(old_values, "old_values (needed by clip > 0)", N, fn);
  const auto dt = math_type(values);
  const auto dev = values.device();
  const auto keep = mask.to(dev) > 0;
  auto masked = [&](const at::Tensor& t) { return at::where(keep, t.to(dev, dt), 0.0); };
  const auto v = masked(values);
  const auto r = masked(returns).detach();
  auto l = (v - r).square();
  if (clip > 0) {
    const auto v_old = masked(old_values).detach();
    l = at::maximum(l, (v_old + (v - v_old).clamp(-clip, clip) - r).square());
  }
  const auto norm = global_tokens > 0 ? at::scalar_tensor(global_tokens, v.options())
                                      : keep.to(dt).sum().clamp_min(1);
  return 0.5 * l.sum() / norm;
}

}  // namespace milesrt::rl
