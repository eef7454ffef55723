// grpo: (r - mean_g) / (std_g + eps), std unbiased (Bessel); a group of one or of all-equal
// rewards gives exactly 0.  dr_grpo (Dr.GRPO): r - mean_g, no division; 0 in a group of one.
// Both put the sample's advantage on every token; returns = advantages.
#include <cmath>

#include "actors/lib/rl/advantages.hpp"
#include "actors/lib/rl/builtin.hpp"

namespace milesrt::rl {
namespace {

class grpo final : public advantage_estimator {
 public:
  explicit grpo(bool std_normalize) : std_normalize_(std_normalize) {}

  std::optional<std::vector<double>> sample_advantages(const std::vector<double>& r,
                                                       const std::vector<int64_t>& group_of,
                                                       double eps) const override {
    const group_statistics g(r, group_of);
    if (!std_normalize_) return g.centered(r);
    std::vector<double> out(r.size(), 0);
    for (size_t i = 0; i < r.size(); ++i) {
      const size_t k = g.group[i];
      out[i] = (g.n[k] < 2 || g.lo[k] == g.hi[k])
                   ? 0.0
                   : (r[i] - g.mean(k)) / (std::sqrt(g.ss[k] / (g.n[k] - 1)) + eps);
    }
    return out;
  }

  host_advantages estimate(const advantage_inputs& in, const advantage_options& o) const override {
    return broadcast_to_tokens(*sample_advantages(in.rewards, in.group_of, o.eps), in);
  }

 private:
  bool std_normalize_;
};

}  // namespace

std::unique_ptr<advantage_estimator> make_grpo_estimator() { return std::make_unique<grpo>(true); }
std::unique_ptr<advantage_estimator> make_dr_grpo_estimator() {
  return std::make_unique<grpo>(false);
}

}  // namespace milesrt::rl
