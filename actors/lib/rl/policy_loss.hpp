#pragma once
/// Policy losses: one interface, one file per surrogate under policy_losses/ (ppo: the token
/// ratio; gspo: the sequence ratio), named in a registry (builtin.hpp). A surrogate gives the
/// per-token policy-gradient term; everything around it is shared and lives here: checking and
/// masking the batch, the ratios and the PPO clip (which both built-in surrogates use), TIS/MIS
/// against the rollout's log-probs, aggregation, the KL, distillation and entropy terms, and the
/// metrics. A new surrogate (a plugin's too) is a class with one method plus one
/// `policy_loss_registry::add` call.
///
/// Layout and masking as in losses.hpp. A zero-length or fully masked batch gives loss 0 (a
/// differentiable zero) and no NaN anywhere; missing inputs that the options need throw
/// c10::Error naming them.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "actors/lib/rl/losses.hpp"
#include "actors/lib/rl/registry.hpp"

namespace milesrt::rl {

enum class mis_level { none, token, sequence };

struct policy_loss_options {
  double eps_clip = 0.2, eps_clip_high = 0.2;  // ratio clipped to [1-eps_clip, 1+eps_clip_high]
  double dual_clip_c = 0;                      // > 1 enables dual clip for negative advantages
  aggregation agg = aggregation::token_mean;
  double constant_normalizer =
      1.0;  // aggregation::constant: sum / (constant_normalizer * global_seqs)
  kl_estimator kl = kl_estimator::none;
  double kl_coef = 0;       // KL-to-reference loss term: + kl_coef * agg(kl)
  double entropy_coef = 0;  // loss -= entropy_coef * agg(entropy)
  bool tis = false;  // w = clamp(exp(old - rollout), tis_low, tis_high), detached, multiplies pg
  double tis_low = 0, tis_high = 2;
  mis_level mis = mis_level::none;     // token: drop tokens whose exp(old - rollout) is outside
  double mis_low = 0.5, mis_high = 2;  // [low, high]; sequence: drop whole sequences whose
                                       // exp(sum over the seq of (old - rollout)) is outside
  double distill_coef = 0;  // reverse KL to a teacher: + coef * agg(distill_per_token(...))
  kl_estimator distill_kl = kl_estimator::k1;  // its estimator (losses.hpp, distill_per_token)
};

struct policy_batch {
  at::Tensor logprobs;          // [N] current policy, requires grad
  at::Tensor old_logprobs;      // [N]
  at::Tensor rollout_logprobs;  // [N] or undefined (needed by tis/mis)
  at::Tensor ref_logprobs;      // [N] or undefined (needed by kl)
  at::Tensor teacher_logprobs;  // [N] or undefined (needed by distill)
  at::Tensor advantages;        // [N]
  at::Tensor entropy;           // [N] or undefined (needed by entropy_coef); may require grad
  at::Tensor mask;              // [N] float
  at::Tensor seq_index;         // [N] int64
  int64_t num_seqs = 0;         // S in this micro-batch (0: max(seq_index) + 1)
  // Normalizers of the whole optimizer step, so that micro-batch losses add up to the step's loss
  // (0: this micro-batch's own count, at least 1):
  double global_tokens = 0;  // masked tokens in the step (token_mean)
  double global_seqs = 0;    // sequences in the step (seq_mean_*, constant)
};

struct loss_result {
  at::Tensor loss;  // scalar, differentiable
  /// Means over this micro-batch's unmasked tokens (0 when there are none): pg_loss (the per-token
  /// pg term after TIS/MIS), pg_clipfrac, pg_clipfrac_lower (dual clip on), ppo_kl (old - new),
  /// kl_loss (kl on), entropy (entropy given), tis_mean and tis_clipfrac (tis on),
  /// mis_masked_frac (mis on); distill on: distill_kl_mean (the distill estimator's value) and
  /// distill_logprob_gap (teacher - student log-prob).
  std::map<std::string, double> metrics;
};

/// One micro-batch as a surrogate and the shared terms see it: checked, on the policy's device,
/// in the math dtype, with masked tokens zeroed before any arithmetic (garbage there, inf or NaN,
/// reaches neither the loss nor a gradient); plus the aggregation and the metric sums.
struct policy_loss_context {
  /// Checks `b` against what `o` needs (c10::Error naming the missing or ill-shaped input).
  policy_loss_context(const policy_batch& b, const policy_loss_options& o);

  const policy_batch& batch;
  const policy_loss_options& options;
  at::ScalarType dtype;
  at::Device device;
  int64_t num_seqs = 0;  ///< S
  at::Tensor seq;        ///< [N] int64 sequence of each token
  at::Tensor keep;       ///< [N] bool: the token is trained
  at::Tensor keep_f;     ///< keep in dtype
  at::Tensor logp;       ///< masked current log-probs (differentiable)
  at::Tensor old, adv;   ///< masked, detached

  /// `t` on the device in dtype, 0 on masked tokens.
  at::Tensor masked(const at::Tensor& t) const;
  /// [S] sums of x over each sequence's tokens.
  at::Tensor per_seq_sum(const at::Tensor& x) const;
  /// x [N] (0 on masked tokens) aggregated by options.agg with the step's normalizers.
  at::Tensor aggregate(const at::Tensor& x);
  /// Records a metric from its sum over the unmasked tokens (reported as the mean).
  void add_metric(std::string name, const at::Tensor& sum);
  /// The result: `loss` and the metrics, with one device-to-host copy for all of them.
  loss_result finish(at::Tensor loss) const;

 private:
  at::Tensor count_, token_norm_, seq_count_;
  double seq_norm_ = 1;
  std::vector<std::pair<std::string, at::Tensor>> sums_;
};

class policy_loss {
 public:
  virtual ~policy_loss() = default;

  /// The per-token policy-gradient term [N] (its values on masked tokens are dropped), before
  /// TIS/MIS; the surrogate's own metrics (clip fractions) go to c.add_metric.
  virtual at::Tensor surrogate(policy_loss_context& c) const = 0;

  /// The micro-batch's loss: the surrogate, weighted by TIS and masked by MIS, aggregated; plus
  /// kl_coef * agg(KL to the reference), distill_coef * agg(distill_per_token), minus
  /// entropy_coef * agg(entropy).
  loss_result compute(const policy_batch& b, const policy_loss_options& o) const;
};

using policy_loss_registry = registry<policy_loss>;

/// PPO's per-token ratio exp(logp - old).
at::Tensor token_ratio(const policy_loss_context& c);
/// GSPO's sequence ratio s_i = exp(mean over the sequence's unmasked tokens of (logp - old)),
/// carried by every token as sg(s_i) * exp(logp_t - sg(logp_t)).
at::Tensor sequence_ratio(const policy_loss_context& c);
/// The PPO clipped objective of `ratio`: pg = max(-A*ratio, -A*clip(ratio, 1-eps_clip,
/// 1+eps_clip_high)); with dual_clip_c > 1, for A < 0: min(pg, -A*c). Records pg_clipfrac (and
/// pg_clipfrac_lower).
at::Tensor clipped_surrogate(policy_loss_context& c, const at::Tensor& ratio);

}  // namespace milesrt::rl
