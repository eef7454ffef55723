#include "actors/lib/rl/advantages.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <unordered_map>

#include "actors/lib/rl/tensor_util.hpp"

namespace milesrt::rl {

group_statistics::group_statistics(const std::vector<double>& r,
                                   const std::vector<int64_t>& group_of)
    : group(r.size()) {
  const size_t S = r.size();
  std::unordered_map<int64_t, size_t> dense;
  for (size_t i = 0; i < S; ++i) group[i] = dense.emplace(group_of[i], dense.size()).first->second;
  const size_t G = dense.size();
  n.assign(G, 0), sum.assign(G, 0), lo.assign(G, INFINITY), hi.assign(G, -INFINITY),
      ss.assign(G, 0);
  for (size_t i = 0; i < S; ++i) {
    const size_t g = group[i];
    n[g] += 1;
    sum[g] += r[i];
    lo[g] = std::min(lo[g], r[i]);
    hi[g] = std::max(hi[g], r[i]);
  }
  for (size_t i = 0; i < S; ++i) {
    const double d = r[i] - sum[group[i]] / n[group[i]];
    ss[group[i]] += d * d;
  }
}

std::vector<double> group_statistics::centered(const std::vector<double>& r) const {
  std::vector<double> out(r.size(), 0);
  for (size_t i = 0; i < r.size(); ++i) {
    const size_t g = group[i];
    out[i] = n[g] < 2 ? 0.0 : r[i] - mean(g);
  }
  return out;
}

host_advantages broadcast_to_tokens(const std::vector<double>& per_sample,
                                    const advantage_inputs& in) {
  const size_t N = in.seq_index.size();
  host_advantages out{std::vector<double>(N, 0), {}};
  for (size_t t = 0; t < N; ++t)
    out.advantages[t] = in.mask[t] > 0 ? per_sample[in.seq_index[t]] : 0.0;
  out.returns = out.advantages;
  return out;
}

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

at::Tensor group_advantages(const at::Tensor& rewards, const std::vector<int64_t>& group_of,
                            const advantage_estimator& e, double eps) {
  check_1d(rewards, "rewards", static_cast<int64_t>(group_of.size()), "group_advantages");
  const auto a = e.sample_advantages(host_doubles(rewards), group_of, eps);
  if (!a) {
    throw std::invalid_argument(
        "group_advantages: this estimator has no per-sample advantages (use token_advantages)");
  }
  return from_host(*a, rewards.device(), math_type(rewards));
}

token_advantages_result token_advantages(const advantage_estimator& e,
                                         const at::Tensor& sample_rewards,
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
  if (e.needs_values()) check_1d(values, "values (needed by the estimator)", N, fn);

  advantage_inputs in;
  auto si_t = seq_index.to(at::kCPU, at::kLong).contiguous();
  in.seq_index.assign(si_t.data_ptr<int64_t>(), si_t.data_ptr<int64_t>() + N);
  for (int64_t t = 0; t < N; ++t) {
    TORCH_CHECK(in.seq_index[t] >= 0 && in.seq_index[t] < S, fn, ": seq_index[", t,
                "] = ", in.seq_index[t], " is outside [0, ", S, ")");
  }
  in.rewards = host_doubles(sample_rewards);
  in.group_of = group_of;
  in.mask = host_doubles(mask);
  in.token_rewards =
      token_rewards.defined() ? host_doubles(token_rewards) : std::vector<double>(N, 0);
  if (values.defined()) in.values = host_doubles(values);
  const auto h = e.estimate(in, o);
  const auto type = math_type(sample_rewards);
  return {from_host(h.advantages, mask.device(), type), from_host(h.returns, mask.device(), type)};
}

}  // namespace milesrt::rl
