#pragma once
/// Advantage estimators: one interface, one file per estimator under estimators/ (grpo and
/// dr_grpo share one, as do reinforce_pp and reinforce_pp_baseline), named in a registry
/// (builtin.hpp). The tensor-facing functions here check the inputs, copy them to the host
/// (per-sample and per-token bookkeeping is small), run the estimator and copy the result back.
///
/// Layout as in losses.hpp: N packed tokens, `seq_index` [N] gives each token's sample, masked
/// tokens take no part in any recursion and get advantage and return 0.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "actors/lib/rl/registry.hpp"

namespace milesrt::rl {

struct advantage_options {
  double gamma = 1.0, lambda = 1.0, eps = 1e-6;
};

/// What an estimator reads, as host copies: S samples, N tokens.
struct advantage_inputs {
  std::vector<double> rewards;        ///< [S] each sample's scalar reward
  std::vector<int64_t> group_of;      ///< [S] samples of one prompt share a group (any ids)
  std::vector<int64_t> seq_index;     ///< [N] each token's sample, in [0, S)
  std::vector<double> mask;           ///< [N] > 0: the token is trained
  std::vector<double> token_rewards;  ///< [N] per-token rewards (zeros when none were given)
  std::vector<double> values;         ///< [N] a critic's values, or empty
};

/// [N] each, 0 on masked tokens.
struct host_advantages {
  std::vector<double> advantages, returns;
};

class advantage_estimator {
 public:
  virtual ~advantage_estimator() = default;
  /// Whether estimate() reads per-token values (a critic's); token_advantages then requires them.
  virtual bool needs_values() const { return false; }
  /// One advantage per sample [S], where the estimator has such a thing; nullopt where it has
  /// not (gae).
  virtual std::optional<std::vector<double>> sample_advantages(const std::vector<double>& rewards,
                                                               const std::vector<int64_t>& group_of,
                                                               double eps) const {
    (void)rewards, (void)group_of, (void)eps;
    return std::nullopt;
  }
  /// Token-level advantages and returns.
  virtual host_advantages estimate(const advantage_inputs& in,
                                   const advantage_options& o) const = 0;
};

using estimator_registry = registry<advantage_estimator>;

/// Per-group statistics of scalar rewards: dense group index per sample, and per group the count,
/// sum, min, max and sum of squared deviations from the mean (accumulated in sample order).
struct group_statistics {
  group_statistics(const std::vector<double>& rewards, const std::vector<int64_t>& group_of);
  std::vector<size_t> group;  ///< [S] dense group of each sample
  std::vector<double> n, sum, lo, hi, ss;
  double mean(size_t g) const { return sum[g] / n[g]; }
  /// r - mean of the sample's group; 0 in a group of one.
  std::vector<double> centered(const std::vector<double>& rewards) const;
};

/// Each sample's advantage on its unmasked tokens (advantages = returns).
host_advantages broadcast_to_tokens(const std::vector<double>& per_sample,
                                    const advantage_inputs& in);

/// Whitens x over the unmasked tokens in place: (x - mean) / (population std + eps); masked
/// tokens become 0.
void whiten(std::vector<double>& x, const std::vector<double>& mask, double eps);

/// Per-sample advantages [S] from scalar rewards [S] and group ids, for estimators that have them
/// (the result has the rewards' device, and their dtype when floating, else fp32); one without
/// (gae) throws std::invalid_argument. See each estimator's file for its formula.
at::Tensor group_advantages(const at::Tensor& rewards, const std::vector<int64_t>& group_of,
                            const advantage_estimator& e, double eps = 1e-6);

struct token_advantages_result {
  at::Tensor advantages, returns;  // [N] each, 0 on masked tokens
};
/// Token-level advantages [N] and returns [N] of estimator `e` (device of `mask`; dtype of
/// sample_rewards when floating, else fp32). token_rewards may be undefined (zeros); values are
/// required by estimators that need them. Bad shapes or seq_index values throw c10::Error.
token_advantages_result token_advantages(const advantage_estimator& e,
                                         const at::Tensor& sample_rewards /*[S]*/,
                                         const std::vector<int64_t>& group_of,
                                         const at::Tensor& seq_index, const at::Tensor& mask,
                                         const at::Tensor& token_rewards /*[N] or undefined*/,
                                         const at::Tensor& values /*[N] or undefined*/,
                                         const advantage_options& o);

}  // namespace milesrt::rl
