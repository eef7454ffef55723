#pragma once
/// RL and SFT losses of the trainer: advantage estimators, KL estimators, the PPO/GSPO policy loss
/// with its extra terms (KL to reference, entropy, TIS/MIS off-policy corrections, distillation),
/// the SFT loss and the clipped critic loss.
///
/// Sequences are packed: all response tokens of a batch lie in one flat dimension N; `seq_index`
/// [N] int64 gives each token's sequence 0..S-1 and `mask` [N] (1/0) excludes tokens. Masked
/// tokens are absent: they take no part in any sum, mean or recursion (the returns and GAE
/// recursions skip them), their advantages and returns are 0, and whatever values they carry
/// (even inf/NaN) never reach a loss or a gradient. Math runs in fp32, or in fp64 when the
/// inputs are fp64.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace milesrt::rl {

enum class estimator { grpo, dr_grpo, rloo, reinforce_pp, reinforce_pp_baseline, gae };
/// "grpo", "dr_grpo", "rloo", "reinforce_pp", "reinforce_pp_baseline", "gae"; anything else
/// throws std::invalid_argument naming the bad value and the allowed ones.
estimator parse_estimator(const std::string& name);
const char* to_string(estimator e);

/// Per-sample advantages [S] from scalar rewards [S] and group ids (samples of one prompt share a
/// group; ids are any integers):
///  grpo: (r - mean_g) / (std_g + eps), std unbiased (Bessel); a group of one or of all-equal
///        rewards gives exactly 0.
///  dr_grpo: r - mean_g.  rloo: r - mean of the other samples of the group (0 for a group of one).
///  reinforce_pp_baseline: r - mean_g (token whitening happens in token_advantages).
///  reinforce_pp: r itself.   gae: not valid here (throws std::invalid_argument).
/// The result has the rewards' device, and their dtype when floating (else fp32).
at::Tensor group_advantages(const at::Tensor& rewards, const std::vector<int64_t>& group_of,
                            estimator e, double eps = 1e-6);

struct advantage_options {
  estimator kind = estimator::grpo;
  double gamma = 1.0, lambda = 1.0, eps = 1e-6;
};
struct token_advantages_result {
  at::Tensor advantages, returns;  // [N] each, 0 on masked tokens
};
/// Token-level advantages [N] and returns [N] (device of `mask`; dtype of sample_rewards when
/// floating, else fp32):
///  grpo/dr_grpo/rloo: the sample's advantage on every token; returns = advantages.
///  reinforce_pp: per token reward r_t = token_rewards[t] (may be undefined: 0), plus the sample's
///    final reward on the sequence's last unmasked token; G_t = sum_{k>=t} gamma^{k-t} r_k over the
///    sequence's unmasked tokens; returns = G; advantages = G whitened over all unmasked tokens of
///    the batch: (G - mean) / (std + eps) with the POPULATION std (divide by the count, not
///    count - 1; a single token whitens to 0).
///  reinforce_pp_baseline: (r - mean_g) on every token (undiscounted), plus the discounted sum of
///    token_rewards if given; returns = that; advantages = it whitened as above.
///  gae: values [N] required: r_t as for reinforce_pp; delta_t = r_t + gamma*V_next - V_t where
///    V_next is the value of the sequence's next unmasked token (0 after its last);
///    A_t = delta_t + gamma*lambda*A_next; returns = A + V; no whitening.
token_advantages_result token_advantages(const at::Tensor& sample_rewards /*[S]*/,
                                         const std::vector<int64_t>& group_of,
                                         const at::Tensor& seq_index, const at::Tensor& mask,
                                         const at::Tensor& token_rewards /*[N] or undefined*/,
                                         const at::Tensor& values /*[N] or undefined*/,
                                         const advantage_options& o);

enum class kl_estimator { none, k1, k2, k3 };
/// "none", "k1", "k2", "k3" (also "low_var_kl" for k3); else std::invalid_argument.
kl_estimator parse_kl(const std::string& name);
const char* to_string(kl_estimator k);
/// Per-token KL estimate between the policy (logp) and the reference (ref): k1 = logp - ref;
/// k2 = 0.5*(logp - ref)^2; k3 = exp(ref - logp) - 1 - (ref - logp); none = zeros.
at::Tensor kl_per_token(const at::Tensor& logp, const at::Tensor& ref, kl_estimator k);

enum class aggregation { token_mean, seq_mean_token_sum, seq_mean_token_mean, constant };
/// "token_mean", "seq_mean_token_sum", "seq_mean_token_mean", "constant"; else std::invalid_argument.
aggregation parse_aggregation(const std::string& name);
const char* to_string(aggregation a);
enum class ratio_level { token, sequence };  // sequence = GSPO
enum class mis_level { none, token, sequence };

struct policy_loss_options {
  double eps_clip = 0.2, eps_clip_high = 0.2;  // ratio clipped to [1-eps_clip, 1+eps_clip_high]
  double dual_clip_c = 0;                      // > 1 enables dual clip for negative advantages
  ratio_level level = ratio_level::token;
  aggregation agg = aggregation::token_mean;
  double constant_normalizer = 1.0;  // aggregation::constant: sum / (constant_normalizer * global_seqs)
  kl_estimator kl = kl_estimator::none;
  double kl_coef = 0;        // KL-to-reference loss term: + kl_coef * agg(kl)
  double entropy_coef = 0;   // loss -= entropy_coef * agg(entropy)
  bool tis = false;          // w = clamp(exp(old - rollout), tis_low, tis_high), detached, multiplies pg
  double tis_low = 0, tis_high = 2;
  mis_level mis = mis_level::none;  // token: drop tokens whose exp(old - rollout) is outside
  double mis_low = 0.5, mis_high = 2;  // [low, high]; sequence: drop whole sequences whose
                                       // exp(sum over the seq of (old - rollout)) is outside
  double distill_coef = 0;  // reverse KL to a teacher (log-probs in `ref`): + coef * agg(sg(logp - ref) * logp)
};

struct policy_batch {
  at::Tensor logprobs;          // [N] current policy, requires grad
  at::Tensor old_logprobs;      // [N]
  at::Tensor rollout_logprobs;  // [N] or undefined (needed by tis/mis)
  at::Tensor ref_logprobs;      // [N] or undefined (needed by kl / distill)
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
  /// mis_masked_frac (mis on), distill_loss (distill on: the reverse-KL estimate logp - ref).
  std::map<std::string, double> metrics;
};

/// PPO clipped surrogate: ratio = exp(logp - old); pg = max(-A*ratio, -A*clip(ratio)); dual clip
/// for A<0: min(that, -A*c).
/// GSPO (level=sequence): s_i = exp(mean over the sequence's masked tokens of (logp - old)), per
/// token s_i,t = sg(s_i) * exp(logp_t - sg(logp_t)), clipped like the token ratio.
/// Aggregations over masked tokens: token_mean = sum(x*m)/global_tokens; seq_mean_token_sum =
/// sum_i(sum_t x*m)/global_seqs; seq_mean_token_mean = sum_i(mean_t x over the seq's masked
/// tokens)/global_seqs (empty seqs contribute 0); constant = sum(x*m)/(constant_normalizer*global_seqs).
/// A zero-length or fully masked batch gives loss 0 (a differentiable zero) and no NaN anywhere.
/// Missing inputs that the options need throw c10::Error naming them.
loss_result policy_loss(const policy_batch& b, const policy_loss_options& o);

/// SFT: -sum(logp * m) / global_tokens (global_tokens <= 0: the masked-token count, at least 1).
at::Tensor sft_loss(const at::Tensor& logprobs, const at::Tensor& mask, double global_tokens);

/// Critic: 0.5 * max((V-R)^2, (V_old + clamp(V - V_old, -clip, clip) - R)^2), token_mean over
/// masked tokens with global_tokens (clip <= 0: unclipped; global_tokens <= 0: local count).
at::Tensor value_loss(const at::Tensor& values, const at::Tensor& old_values,
                      const at::Tensor& returns, const at::Tensor& mask, double clip,
                      double global_tokens);

}  // namespace milesrt::rl
