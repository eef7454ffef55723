// gae (generalized advantage estimation, PPO): values [N] from a critic; r_t as for reinforce_pp
// (token rewards, plus the sample's reward on its last unmasked token); delta_t = r_t +
// gamma*V_next - V_t where V_next is the value of the sequence's next unmasked token (0 after its
// last); A_t = delta_t + gamma*lambda*A_next; returns = A + V; no whitening.
#include "actors/lib/rl/advantages.hpp"
#include "actors/lib/rl/builtin.hpp"

namespace milesrt::rl {
namespace {

class gae final : public advantage_estimator {
 public:
  bool needs_values() const override { return true; }

  host_advantages estimate(const advantage_inputs& in, const advantage_options& o) const override {
    const size_t S = in.rewards.size(), N = in.seq_index.size();
    const auto& v = in.values;
    host_advantages out{std::vector<double>(N, 0), std::vector<double>(N, 0)};
    std::vector<double> next_v(S, 0), next_a(S, 0);
    std::vector<char> seen(S, 0);
    for (size_t t = N; t-- > 0;) {
      if (!(in.mask[t] > 0)) continue;
      const int64_t s = in.seq_index[t];
      const double rt = in.token_rewards[t] + (seen[s] ? 0.0 : in.rewards[s]);
      seen[s] = 1;
      const double delta = rt + o.gamma * next_v[s] - v[t];
      out.advantages[t] = delta + o.gamma * o.lambda * next_a[s];
      out.returns[t] = out.advantages[t] + v[t];
      next_v[s] = v[t];
      next_a[s] = out.advantages[t];
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<advantage_estimator> make_gae_estimator() { return std::make_unique<gae>(); }

}  // namespace milesrt::rl
