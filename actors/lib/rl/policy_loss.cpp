#include "actors/lib/rl/policy_loss.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "actors/lib/rl/tensor_util.hpp"

namespace milesrt::rl {
namespace {

constexpr const char* fn = "policy_loss";

bool uses_rollout(const policy_loss_options& o) { return o.tis || o.mis != mis_level::none; }
bool uses_kl(const policy_batch& b, const policy_loss_options& o) {
  return o.kl != kl_estimator::none && (o.kl_coef != 0 || b.ref_logprobs.defined());
}

const at::Tensor& checked_logprobs(const policy_batch& b) {
  TORCH_CHECK(b.logprobs.defined() && b.logprobs.dim() == 1, fn, ": logprobs must be 1-D");
  return b.logprobs;
}

void check_inputs(const policy_batch& b, const policy_loss_options& o) {
  const int64_t N = b.logprobs.size(0);
  check_1d(b.old_logprobs, "old_logprobs", N, fn);
  check_1d(b.advantages, "advantages", N, fn);
  check_1d(b.mask, "mask", N, fn);
  check_1d(b.seq_index, "seq_index", N, fn);
  if (uses_rollout(o)) check_1d(b.rollout_logprobs, "rollout_logprobs (needed by tis/mis)", N, fn);
  if (uses_kl(b, o)) check_1d(b.ref_logprobs, "ref_logprobs (needed by kl)", N, fn);
  if (o.distill_coef != 0)
    check_1d(b.teacher_logprobs, "teacher_logprobs (needed by distill)", N, fn);
  TORCH_CHECK(o.distill_coef == 0 || o.distill_kl != kl_estimator::none, fn,
              ": distillation needs an estimator (k1, k2, k3), not none");
  if (o.entropy_coef != 0) check_1d(b.entropy, "entropy (needed by entropy_coef)", N, fn);
  if (b.entropy.defined()) check_1d(b.entropy, "entropy", N, fn);
  TORCH_CHECK(o.agg != aggregation::constant || o.constant_normalizer > 0, fn,
              ": constant_normalizer must be > 0, got ", o.constant_normalizer);
}

/// TIS weights and MIS masks from the old/rollout importance ratio.
at::Tensor off_policy_correction(policy_loss_context& c, at::Tensor pg) {
  const auto& o = c.options;
  if (!uses_rollout(o)) return pg;
  const auto rollout = c.masked(c.batch.rollout_logprobs).detach();
  const auto behav = c.old - rollout;  // log of the old/rollout importance ratio, 0 on masked
  if (o.tis) {
    const auto raw = at::exp(behav);
    const auto w = raw.clamp(o.tis_low, o.tis_high);
    pg = pg * w;
    c.add_metric("tis_mean", (w * c.keep_f).sum());
    c.add_metric("tis_clipfrac",
                 (((raw < o.tis_low) | (raw > o.tis_high)) & c.keep).to(c.dtype).sum());
  }
  if (o.mis != mis_level::none) {
    at::Tensor ok;
    if (o.mis == mis_level::token) {
      const auto raw = at::exp(behav);
      ok = (raw >= o.mis_low) & (raw <= o.mis_high);
    } else {  // compared in log space: the exp of a long sequence's sum overflows
      const auto s = c.per_seq_sum(behav);
      ok = ((s >= std::log(o.mis_low)) & (s <= std::log(o.mis_high))).index_select(0, c.seq);
    }
    pg = pg * ok.to(c.dtype);
    c.add_metric("mis_masked_frac", ((~ok) & c.keep).to(c.dtype).sum());
  }
  return pg;
}

/// The KL-to-reference and distillation terms.
at::Tensor add_reference_terms(policy_loss_context& c, at::Tensor loss) {
  const auto& o = c.options;
  if (uses_kl(c.batch, o)) {
    const auto ref = c.masked(c.batch.ref_logprobs).detach();
    const auto k = kl_per_token(c.logp, ref, o.kl);  // 0 on masked tokens for every estimator
    if (o.kl_coef != 0) loss = loss + o.kl_coef * c.aggregate(k);
    c.add_metric("kl_loss", k.detach().sum());
  }
  if (o.distill_coef != 0) {
    const auto teacher = c.masked(c.batch.teacher_logprobs).detach();
    // 0 on masked tokens: logp and teacher are both 0 there, for every estimator.
    loss = loss + o.distill_coef * c.aggregate(distill_per_token(c.logp, teacher, o.distill_kl));
    c.add_metric("distill_kl_mean", kl_per_token(c.logp.detach(), teacher, o.distill_kl).sum());
    c.add_metric("distill_logprob_gap", (teacher - c.logp.detach()).sum());
  }
  return loss;
}

at::Tensor add_entropy_term(policy_loss_context& c, at::Tensor loss) {
  if (!c.batch.entropy.defined()) return loss;
  const auto ent = c.masked(c.batch.entropy);
  if (c.options.entropy_coef != 0) loss = loss - c.options.entropy_coef * c.aggregate(ent);
  c.add_metric("entropy", ent.detach().sum());
  return loss;
}

}  // namespace

policy_loss_context::policy_loss_context(const policy_batch& b, const policy_loss_options& o)
    : batch(b), options(o), dtype(math_type(checked_logprobs(b))), device(b.logprobs.device()) {
  check_inputs(b, o);
  const int64_t N = b.logprobs.size(0);
  seq = b.seq_index.to(device, at::kLong);
  int64_t S = b.num_seqs;
  if (N > 0) {
    const auto mm = at::aminmax(seq);
    const int64_t lo = std::get<0>(mm).item<int64_t>(), hi = std::get<1>(mm).item<int64_t>();
    if (S <= 0) S = hi + 1;
    TORCH_CHECK(lo >= 0 && hi < S, fn, ": seq_index spans [", lo, ", ", hi, "] but num_seqs = ", S);
  }
  num_seqs = std::max<int64_t>(S, 0);
  keep = b.mask.to(device) > 0;
  keep_f = keep.to(dtype);
  logp = masked(b.logprobs);
  old = masked(b.old_logprobs).detach();
  adv = masked(b.advantages).detach();
  count_ = keep_f.sum();
  token_norm_ = b.global_tokens > 0 ? at::scalar_tensor(b.global_tokens, keep_f.options())
                                    : count_.clamp_min(1);
  seq_norm_ =
      b.global_seqs > 0 ? b.global_seqs : static_cast<double>(std::max<int64_t>(num_seqs, 1));
}

at::Tensor policy_loss_context::masked(const at::Tensor& t) const {
  return at::where(keep, t.to(device, dtype), 0.0);
}

at::Tensor policy_loss_context::per_seq_sum(const at::Tensor& x) const {
  return at::zeros({num_seqs}, x.options()).index_add(0, seq, x);
}

at::Tensor policy_loss_context::aggregate(const at::Tensor& x) {
  switch (options.agg) {
    case aggregation::token_mean:
      return x.sum() / token_norm_;
    case aggregation::seq_mean_token_sum:
      return x.sum() / seq_norm_;
    case aggregation::seq_mean_token_mean:
      if (!seq_count_.defined()) seq_count_ = per_seq_sum(keep_f).clamp_min(1);
      return (per_seq_sum(x) / seq_count_).sum() / seq_norm_;
    case aggregation::constant:
      return x.sum() / (options.constant_normalizer * seq_norm_);
  }
  TORCH_CHECK(false, fn, ": bad aggregation");
}

void policy_loss_context::add_metric(std::string name, const at::Tensor& sum) {
  sums_.emplace_back(std::move(name), sum);
}

loss_result policy_loss_context::finish(at::Tensor loss) const {
  std::vector<at::Tensor> parts{count_.detach()};
  for (const auto& [name, t] : sums_) parts.push_back(t.reshape({}));
  const auto host = at::stack(parts).to(at::kCPU, at::kDouble).contiguous();
  const double* h = host.data_ptr<double>();
  loss_result out;
  out.loss = std::move(loss);
  for (size_t i = 0; i < sums_.size(); ++i)
    out.metrics[sums_[i].first] = h[0] > 0 ? h[i + 1] / h[0] : 0.0;
  return out;
}

loss_result policy_loss::compute(const policy_batch& b, const policy_loss_options& o) const {
  policy_loss_context c(b, o);
  auto pg = off_policy_correction(c, surrogate(c));
  pg = at::where(c.keep, pg, 0.0);
  auto loss = c.aggregate(pg);
  c.add_metric("pg_loss", pg.detach().sum());
  c.add_metric("ppo_kl", (c.old - c.logp.detach()).sum());
  loss = add_reference_terms(c, loss);
  loss = add_entropy_term(c, loss);
  return c.finish(loss);
}

at::Tensor token_ratio(const policy_loss_context& c) { return at::exp(c.logp - c.old); }

at::Tensor sequence_ratio(const policy_loss_context& c) {
  const auto log_ratio = c.logp - c.old;  // 0 on masked tokens
  const auto seq_mean = c.per_seq_sum(log_ratio.detach()) / c.per_seq_sum(c.keep_f).clamp_min(1);
  return at::exp(seq_mean).index_select(0, c.seq) * at::exp(log_ratio - log_ratio.detach());
}

at::Tensor clipped_surrogate(policy_loss_context& c, const at::Tensor& ratio) {
  const auto& o = c.options;
  const auto pg1 = -c.adv * ratio;
  const auto pg2 = -c.adv * ratio.clamp(1 - o.eps_clip, 1 + o.eps_clip_high);
  auto pg = at::maximum(pg1, pg2);
  c.add_metric("pg_clipfrac", ((pg2 > pg1) & c.keep).to(c.dtype).sum());
  if (o.dual_clip_c > 1) {
    const auto pg3 = -c.adv * o.dual_clip_c;
    const auto lower = (c.adv < 0) & (pg3 < pg);
    c.add_metric("pg_clipfrac_lower", (lower & c.keep).to(c.dtype).sum());
    pg = at::where(lower, pg3, pg);
  }
  return pg;
}

}  // namespace milesrt::rl
