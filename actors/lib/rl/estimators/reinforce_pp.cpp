// REINFORCE++ and its group-baseline variant; both whiten over all unmasked tokens of the batch:
// (G - mean) / (std + eps) with the POPULATION std (divide by the count; one token whitens to 0).
//  reinforce_pp: per token reward r_t = token_rewards[t], plus the sample's final reward on the
//    sequence's last unmasked token; G_t = sum_{k>=t} gamma^{k-t} r_k over the sequence's unmasked
//    tokens; returns = G, advantages = G whitened. Its per-sample advantage is r itself.
//  reinforce_pp_baseline: (r - mean_g) on every token (undiscounted), plus the discounted sum of
//    token_rewards; returns = that, advantages = it whitened. Per sample: r - mean_g.
#include "actors/lib/rl/advantages.hpp"
#include "actors/lib/rl/builtin.hpp"

namespace milesrt::rl {
namespace {

class reinforce_pp final : public advantage_estimator {
 public:
  explicit reinforce_pp(bool baseline) : baseline_(baseline) {}

  std::optional<std::vector<double>> sample_advantages(const std::vector<double>& r,
                                                       const std::vector<int64_t>& group_of,
                                                       double) const override {
    if (!baseline_) return r;
    return group_statistics(r, group_of).centered(r);
  }

  host_advantages estimate(const advantage_inputs& in, const advantage_options& o) const override {
    const size_t S = in.rewards.size(), N = in.seq_index.size();
    const auto base = *sample_advantages(in.rewards, in.group_of, o.eps);
    host_advantages out{std::vector<double>(N, 0), std::vector<double>(N, 0)};
    std::vector<double> running(S, 0);
    std::vector<char> seen(S, 0);
    for (size_t t = N; t-- > 0;) {
      if (!(in.mask[t] > 0)) continue;
      const int64_t s = in.seq_index[t];
      double rt = in.token_rewards[t];
      if (!baseline_ && !seen[s]) rt += base[s];  // the final reward sits on the last token
      seen[s] = 1;
      running[s] = rt + o.gamma * running[s];
      out.returns[t] = baseline_ ? base[s] + running[s] : running[s];
    }
    out.advantages = out.returns;
    whiten(out.advantages, in.mask, o.eps);
    return out;
  }

 private:
  bool baseline_;
};

}  // namespace

std::unique_ptr<advantage_estimator> make_reinforce_pp_estimator() {
  return std::make_unique<reinforce_pp>(false);
}
std::unique_ptr<advantage_estimator> make_reinforce_pp_baseline_estimator() {
  return std::make_unique<reinforce_pp>(true);
}

}  // namespace milesrt::rl
