// rloo (REINFORCE leave-one-out): r - mean of the other samples of the group; 0 in a group of
// one. The sample's advantage on every token; returns = advantages.
#include "actors/lib/rl/advantages.hpp"
#include "actors/lib/rl/builtin.hpp"

namespace milesrt::rl {
namespace {

class rloo final : public advantage_estimator {
 public:
  std::optional<std::vector<double>> sample_advantages(const std::vector<double>& r,
                                                       const std::vector<int64_t>& group_of,
                                                       double) const override {
    const group_statistics g(r, group_of);
    std::vector<double> out(r.size(), 0);
    for (size_t i = 0; i < r.size(); ++i) {
      const size_t k = g.group[i];
      out[i] = g.n[k] < 2 ? 0.0 : r[i] - (g.sum[k] - r[i]) / (g.n[k] - 1);
    }
    return out;
  }

  host_advantages estimate(const advantage_inputs& in, const advantage_options& o) const override {
    return broadcast_to_tokens(*sample_advantages(in.rewards, in.group_of, o.eps), in);
  }
};

}  // namespace

std::unique_ptr<advantage_estimator> make_rloo_estimator() { return std::make_unique<rloo>(); }

}  // namespace milesrt::rl
