#pragma once
/// The loss terms of the RL library that are not an extension point: KL estimators, the
/// aggregations of per-token terms, the SFT loss and the clipped critic loss. Policy losses
/// (policy_loss.hpp) and advantage estimators (advantages.hpp) are registries of their own.
///
/// Sequences are packed: all response tokens of a batch lie in one flat dimension N; `seq_index`
/// [N] int64 gives each token's sequence 0..S-1 and `mask` [N] (1/0) excludes tokens. Masked
/// tokens are absent: they take no part in any sum, mean or recursion, and whatever values they
/// carry (even inf/NaN) never reach a loss or a gradient. Math runs in fp32, or in fp64 when the
/// inputs are fp64.

#include <ATen/core/Tensor.h>

#include <string>

namespace milesrt::rl {

enum class kl_estimator { none, k1, k2, k3 };
/// "none", "k1", "k2", "k3" (also "low_var_kl" for k3); else std::invalid_argument.
kl_estimator parse_kl(const std::string& name);
const char* to_string(kl_estimator k);
/// Per-token KL estimate between the policy (logp) and the reference (ref): k1 = logp - ref;
/// k2 = 0.5*(logp - ref)^2; k3 = exp(ref - logp) - 1 - (ref - logp); none = zeros.
at::Tensor kl_per_token(const at::Tensor& logp, const at::Tensor& ref, kl_estimator k);

/// On-policy distillation's per-token loss toward a teacher (logp: the student's log-probs of its
/// own sampled tokens, differentiable; teacher: detached). k1: sg(logp - teacher) * logp, whose
/// gradient (logp - teacher) grad logp is, in expectation over the student's samples, the
/// gradient of the reverse KL(student || teacher); k2, k3: kl_per_token differentiated directly
/// (k3's expected gradient is the forward KL(teacher || student)'s, its value in expectation the
/// reverse KL; lower variance). The value of every estimator is, in expectation, the reverse KL
/// for k1 and k3.
at::Tensor distill_per_token(const at::Tensor& logp, const at::Tensor& teacher, kl_estimator k);

enum class aggregation { token_mean, seq_mean_token_sum, seq_mean_token_mean, constant };
/// "token_mean", "seq_mean_token_sum", "seq_mean_token_mean", "constant"; else
/// std::invalid_argument.
aggregation parse_aggregation(const std::string& name);
const char* to_string(aggregation a);

/// SFT: -sum(logp * m) / global_tokens (global_tokens <= 0: the masked-token count, at least 1).
at::Tensor sft_loss(const at::Tensor& logprobs, const at::Tensor& mask, double global_tokens);

/// Critic: 0.5 * max((V-R)^2, (V_old + clamp(V - V_old, -clip, clip) - R)^2), token_mean over
/// masked tokens with global_tokens (clip <= 0: unclipped; global_tokens <= 0: local count).
at::Tensor value_loss(const at::Tensor& values, const at::Tensor& old_values,
                      const at::Tensor& returns, const at::Tensor& mask, double clip,
                      double global_tokens);

}  // namespace milesrt::rl
