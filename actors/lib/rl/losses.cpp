#include "actors/lib/rl/losses.hpp"

#include <ATen/ATen.h>

#include <cmath>
#include <stdexcept>
#include <unordered_map>

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

const std::pair<const char*, estimator> estimator_names[] = {
    {"grpo", estimator::grpo}, {"dr_grpo", estimator::dr_grpo}, {"rloo", estimator::rloo},
    {"reinforce_pp", estimator::reinforce_pp},
    {"reinforce_pp_baseline", estimator::reinforce_pp_baseline}, {"gae", estimator::gae}};
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

template <typename E, size_t K>
const char* name_of(E e, const std::pair<const char*, E> (&table)[K]) {
  for (const auto& [n, v] : table)
    if (v == e) return n;
  return "?";
}

/// fp64 stays fp64; everything else computes in fp32.
at::ScalarType math_type(const at::Tensor& t) {
  return t.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

/// A host copy as contiguous doubles (small per-sample/per-token bookkeeping runs on the host).
std::vector<double> host_doubles(const at::Tensor& t) {
  auto c = t.detach().to(at::kCPU, at::kDouble).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

at::Tensor from_host(const std::vector<double>& v, const at::Device& device, at::ScalarType type) {
  return at::tensor(at::ArrayRef<double>(v), at::TensorOptions().dtype(at::kDouble))
      .to(device, type);
}

void check_1d(const at::Tensor& t, const char* name, int64_t n, const char* fn) {
  TORCH_CHECK(t.defined(), fn, ": ", name, " is required");
  TORCH_CHECK(t.dim() == 1 && t.size(0) == n, fn, ": ", name, " must be [", n, "], got ",
              t.sizes());
}

std::vector<double> group_advantages_host(const std::vector<double>& r,
                                          const std::vector<int64_t>& group_of, estimator e,
                                          double eps) {
  const size_t S = r.size();
  std::unordered_map<int64_t, size_t> dense;
  std::vector<size_t> g(S);
  for (size_t i = 0; i < S; ++i) g[i] = dense.emplace(group_of[i], dense.size()).first->second;
  const size_t G = dense.size();
  std::vector<double> n(G, 0), sum(G, 0), lo(G, INFINITY), hi(G, -INFINITY), ss(G, 0);
  for (size_t i = 0; i < S; ++i) {
    n[g[i]] += 1;
    sum[g[i]] += r[i];
    lo[g[i]] = std::min(lo[g[i]], r[i]);
    hi[g[i]] = std::max(hi[g[i]], r[i]);
  }
  for (size_t i = 0; i < S; ++i) {
    const double d = r[i] - sum[g[i]] / n[g[i]];
    ss[g[i]] += d * d;
  }
  std::vector<double> out(S, 0);
  for (size_t i = 0; i < S; ++i) {
    const size_t k = g[i];
    const double mean = sum[k] / n[k];
    switch (e) {
      case estimator::grpo:
        out[i] = (n[k] < 2 || lo[k] == hi[k])
                     ? 0.0
                     : (r[i] - mean) / (std::sqrt(ss[k] / (n[k] - 1)) + eps);
        break;
      case estimator::dr_grpo:
      case estimator::reinforce_pp_baseline:
        out[i] = n[k] < 2 ? 0.0 : r[i] - mean;
        break;
      case estimator::rloo:
        out[i] = n[k] < 2 ? 0.0 : r[i] - (sum[k] - r[i]) / (n[k] - 1);
        break;
      case estimator::reinforce_pp:
        out[i] = r[i];
        break;
      case estimator::gae:
        throw std::invalid_argument(
            "group_advantages: estimator 'gae' has no per-sample advantages (use token_advantages "
            "with values)");
    }
  }
  return out;
}

/// Whitens x over the unmasked tokens in place: (x - mean) / (population std + eps).
void whiten(std::vector<double>& x, const std::vector<double>& m, double eps) {
  double n = 0, sum = 0;
  for (size_t t = 0; t < x.size(); ++t)
    if (m[t] > 0) n += 1, sum += x[t];
  if (n == 0) return;
  const double mean = sum / n;
  double ss = 0;
  for (size_t t = 0; t < x.size(); ++t)
    if (m[t] > 0) ss += (x[t] - mean) * (x[t] - mean);
  const double std_dev = std::sqrt(ss / n);
  for (size_t t = 0; t < x.size(); ++t) x[t] = m[t] > 0 ? (x[t] - mean) / (std_dev + eps) : 0.0;
}

}  // namespace

estimator parse_estimator(const std::string& name) {
  return parse_enum("advantage estimator", name, estimator_names);
}
const char* to_string(estimator e) { return name_of(e, estimator_names); }
kl_estimator parse_kl(const std::string& name) {
  return parse_enum("KL estimator", name, kl_names);
}
const char* to_string(kl_estimator k) { return name_of(k, kl_names); }
aggregation parse_aggregation(const std::string& name) {
  return parse_enum("loss aggregation", name, aggregation_names);
}
const char* to_string(aggregation a) { return name_of(a, aggregation_names); }

at::Tensor group_advantages(const at::Tensor& rewards, const std::vector<int64_t>& group_of,
                            estimator e, double eps) {
  if (e == estimator::gae)
    throw std::invalid_argument(
        "group_advantages: estimator 'gae' has no per-sample advantages (use token_advantages "
        "with values)");
  check_1d(rewards, "rewards", static_cast<int64_t>(group_of.size()), "group_advantages");
  return from_host(group_advantages_host(host_doubles(rewards), group_of, e, eps),
                   rewards.device(), math_type(rewards));
}

token_advantages_result token_advantages(const at::Tensor& sample_rewards,
                                         const std::vector<int64_t>& group_of,
                                         const at::Tensor& seq_index, const at::Tensor& mask,
                                         const at::Tensor& token_rewards, const at::Tensor& values,
                                         const advantage_options& o) {
  const char* fn = "token_advantages";
  const auto S = static_cast<int64_t>(group_of.size());
  check_1d(sample_rewards, "sample_rewards", S, fn);
  TORCH_CHECK(seq_index.defined() && seq_index.dim() == 1, fn, ": seq_index must be 1-D");
  const int64_t N = seq_index.size(0);
  check_1d(mask, "mask", N, fn);
  if (token_rewards.defined()) check_1d(token_rewards, "token_rewards", N, fn);
  if (o.kind == estimator::gae) check_1d(values, "values (needed by gae)", N, fn);

  auto si_t = seq_index.to(at::kCPU, at::kLong).contiguous();
  const int64_t* si = si_t.data_ptr<int64_t>();
  for (int64_t t = 0; t < N; ++t)
    TORCH_CHECK(si[t] >= 0 && si[t] < S, fn, ": seq_index[", t, "] = ", si[t],
                " is outside [0, ", S, ")");
  const auto m = host_doubles(mask);
  const auto r = host_doubles(sample_rewards);
  const auto tr = token_rewards.defined() ? host_doubles(token_rewards) : std::vector<double>(N, 0);
  std::vector<double> adv(N, 0), ret(N, 0);

  switch (o.kind) {
    case estimator::grpo:
    case estimator::dr_grpo:
    case estimator::rloo: {
      const auto a = group_advantages_host(r, group_of, o.kind, o.eps);
      for (int64_t t = 0; t < N; ++t) adv[t] = ret[t] = m[t] > 0 ? a[si[t]] : 0.0;
      break;
    }
    case estimator::reinforce_pp:
    case estimator::reinforce_pp_baseline: {
      const bool baseline = o.kind == estimator::reinforce_pp_baseline;
      const auto base = baseline ? group_advantages_host(r, group_of, o.kind, o.eps) : r;
      std::vector<double> running(S, 0);
      std::vector<char> seen(S, 0);
      for (int64_t t = N - 1; t >= 0; --t) {
        if (!(m[t] > 0)) continue;
        const int64_t s = si[t];
        double rt = tr[t];
        if (!baseline && !seen[s]) rt += base[s];  // the final reward sits on the last token
        seen[s] = 1;
        running[s] = rt + o.gamma * running[s];
        ret[t] = baseline ? base[s] + running[s] : running[s];
      }
      adv = ret;
      whiten(adv, m, o.eps);
      break;
    }
    case estimator::gae: {
      const auto v = host_doubles(values);
      std::vector<double> next_v(S, 0), next_a(S, 0);
      std::vector<char> seen(S, 0);
      for (int64_t t = N - 1; t >= 0; --t) {
        if (!(m[t] > 0)) continue;
        const int64_t s = si[t];
        const double rt = tr[t] + (seen[s] ? 0.0 : r[s]);
        seen[s] = 1;
        const double delta = rt + o.gamma * next_v[s] - v[t];
        adv[t] = delta + o.gamma * o.lambda * next_a[s];
        ret[t] = adv[t] + v[t];
        next_v[s] = v[t];
        next_a[s] = adv[t];
      }
      break;
    }
  }
  const auto type = math_type(sample_rewards);
  return {from_host(adv, mask.device(), type), from_host(ret, mask.device(), type)};
}

at::Tensor kl_per_token(const at::Tensor& logp, const at::Tensor& ref, kl_estimator k) {
  switch (k) {
    case kl_estimator::none: return at::zeros_like(logp);
    case kl_estimator::k1: return logp - ref;
    case kl_estimator::k2: return 0.5 * (logp - ref).square();
    case kl_estimator::k3: {
      const auto d = ref - logp;
      return at::exp(d) - 1 - d;
    }
  }
  TORCH_CHECK(false, "kl_per_token: bad estimator");
}

loss_result policy_loss(const policy_batch& b, const policy_loss_options& o) {
  const char* fn = "policy_loss";
  TORCH_CHECK(b.logprobs.defined() && b.logprobs.dim() == 1, fn, ": logprobs must be 1-D");
  const int64_t N = b.logprobs.size(0);
  const auto dt = math_type(b.logprobs);
  const auto dev = b.logprobs.device();
  check_1d(b.old_logprobs, "old_logprobs", N, fn);
  check_1d(b.advantages, "advantages", N, fn);
  check_1d(b.mask, "mask", N, fn);
  check_1d(b.seq_index, "seq_index", N, fn);
  const bool need_rollout = o.tis || o.mis != mis_level::none;
  if (need_rollout) check_1d(b.rollout_logprobs, "rollout_logprobs (needed by tis/mis)", N, fn);
  const bool use_kl = o.kl != kl_estimator::none && (o.kl_coef != 0 || b.ref_logprobs.defined());
  if (use_kl || o.distill_coef != 0)
    check_1d(b.ref_logprobs, "ref_logprobs (needed by kl/distill)", N, fn);
  if (o.entropy_coef != 0) check_1d(b.entropy, "entropy (needed by entropy_coef)", N, fn);
  if (b.entropy.defined()) check_1d(b.entropy, "entropy", N, fn);
  TORCH_CHECK(o.agg != aggregation::constant || o.constant_normalizer > 0, fn,
              ": constant_normalizer must be > 0, got ", o.constant_normalizer);

  const auto seq = b.seq_index.to(dev, at::kLong);
  int64_t S = b.num_seqs;
  if (N > 0) {
    const auto mm = at::aminmax(seq);
    const int64_t lo = std::get<0>(mm).item<int64_t>(), hi = std::get<1>(mm).item<int64_t>();
    if (S <= 0) S = hi + 1;
    TORCH_CHECK(lo >= 0 && hi < S, fn, ": seq_index spans [", lo, ", ", hi, "] but num_seqs = ", S);
  }
  S = std::max<int64_t>(S, 0);

  const auto keep = b.mask.to(dev) > 0;
  const auto keep_f = keep.to(dt);
  // Masked tokens are zeroed before any arithmetic, so that garbage there (inf, NaN) reaches
  // neither the loss nor a gradient (where() passes them no gradient at all).
  auto masked = [&](const at::Tensor& t) { return at::where(keep, t.to(dev, dt), 0.0); };
  const auto logp = masked(b.logprobs);
  const auto old = masked(b.old_logprobs).detach();
  const auto adv = masked(b.advantages).detach();

  const auto count = keep_f.sum();
  const at::Tensor tok_norm = b.global_tokens > 0 ? at::scalar_tensor(b.global_tokens, keep_f.options())
                                                  : count.clamp_min(1);
  const double seq_norm = b.global_seqs > 0 ? b.global_seqs : static_cast<double>(std::max<int64_t>(S, 1));
  at::Tensor seq_count;  // unmasked tokens per sequence, on demand
  auto per_seq_sum = [&](const at::Tensor& x) {
    return at::zeros({S}, x.options()).index_add(0, seq, x);
  };
  auto agg = [&](const at::Tensor& x) -> at::Tensor {  // x is 0 on masked tokens
    switch (o.agg) {
      case aggregation::token_mean: return x.sum() / tok_norm;
      case aggregation::seq_mean_token_sum: return x.sum() / seq_norm;
      case aggregation::seq_mean_token_mean:
        if (!seq_count.defined()) seq_count = per_seq_sum(keep_f).clamp_min(1);
        return (per_seq_sum(x) / seq_count).sum() / seq_norm;
      case aggregation::constant: return x.sum() / (o.constant_normalizer * seq_norm);
    }
    TORCH_CHECK(false, "policy_loss: bad aggregation");
  };

  // The ratio: per token, or GSPO's sequence ratio carried by every token of the sequence.
  const auto log_ratio = logp - old;  // 0 on masked tokens
  at::Tensor ratio;
  if (o.level == ratio_level::token) {
    ratio = at::exp(log_ratio);
  } else {
    const auto seq_mean =
        per_seq_sum(log_ratio.detach()) / per_seq_sum(keep_f).clamp_min(1);
    ratio = at::exp(seq_mean).index_select(0, seq) * at::exp(log_ratio - log_ratio.detach());
  }
  const auto pg1 = -adv * ratio;
  const auto pg2 = -adv * ratio.clamp(1 - o.eps_clip, 1 + o.eps_clip_high);
  auto pg = at::maximum(pg1, pg2);
  std::vector<std::pair<std::string, at::Tensor>> sums;  // metric name -> sum over unmasked tokens
  sums.emplace_back("pg_clipfrac", ((pg2 > pg1) & keep).to(dt).sum());
  if (o.dual_clip_c > 1) {
    const auto pg3 = -adv * o.dual_clip_c;
    const auto lower = (adv < 0) & (pg3 < pg);
    sums.emplace_back("pg_clipfrac_lower", (lower & keep).to(dt).sum());
    pg = at::where(lower, pg3, pg);
  }
  if (need_rollout) {
    const auto rollout = masked(b.rollout_logprobs).detach();
    const auto behav = old - rollout;  // log of the old/rollout importance ratio, 0 on masked
    if (o.tis) {
      const auto raw = at::exp(behav);
      const auto w = raw.clamp(o.tis_low, o.tis_high);
      pg = pg * w;
      sums.emplace_back("tis_mean", (w * keep_f).sum());
      sums.emplace_back("tis_clipfrac", (((raw < o.tis_low) | (raw > o.tis_high)) & keep).to(dt).sum());
    }
    if (o.mis != mis_level::none) {
      at::Tensor ok;
      if (o.mis == mis_level::token) {
        const auto raw = at::exp(behav);
        ok = (raw >= o.mis_low) & (raw <= o.mis_high);
      } else {  // compared in log space: the exp of a long sequence's sum overflows
        const auto s = per_seq_sum(behav);
        ok = ((s >= std::log(o.mis_low)) & (s <= std::log(o.mis_high))).index_select(0, seq);
      }
      pg = pg * ok.to(dt);
      sums.emplace_back("mis_masked_frac", ((~ok) & keep).to(dt).sum());
    }
  }
  pg = at::where(keep, pg, 0.0);
  auto loss = agg(pg);
  sums.emplace_back("pg_loss", pg.detach().sum());
  sums.emplace_back("ppo_kl", (old - logp.detach()).sum());

  if (use_kl || o.distill_coef != 0) {
    const auto ref = masked(b.ref_logprobs).detach();
    if (use_kl) {
      const auto kl = kl_per_token(logp, ref, o.kl);  // 0 on masked tokens for every estimator
      if (o.kl_coef != 0) loss = loss + o.kl_coef * agg(kl);
      sums.emplace_back("kl_loss", kl.detach().sum());
    }
    if (o.distill_coef != 0) {
      const auto diff = (logp - ref).detach();
      loss = loss + o.distill_coef * agg(diff * logp);
      sums.emplace_back("distill_loss", diff.sum());
    }
  }
  if (b.entropy.defined()) {
    const auto ent = masked(b.entropy);
    if (o.entropy_coef != 0) loss = loss - o.entropy_coef * agg(ent);
    sums.emplace_back("entropy", ent.detach().sum());
  }

  // One device-to-host copy for all metrics.
  std::vector<at::Tensor> parts{count.detach()};
  for (auto& [name, t] : sums) parts.push_back(t.reshape({}));
  const auto host = at::stack(parts).to(at::kCPU, at::kDouble).contiguous();
  const double* h = host.data_ptr<double>();
  loss_result out;
  out.loss = loss;
  for (size_t i = 0; i < sums.size(); ++i) out.metrics[sums[i].first] = h[0] > 0 ? h[i + 1] / h[0] : 0.0;
  return out;
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
