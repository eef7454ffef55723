// priority: the groups with the largest reward spread (the population standard deviation of their
// samples' rewards: the most GRPO signal) first, ties in arrival order. A group with uniform
// rewards waits behind every group with a spread, so that it does not wait forever the staleness
// rule applies as in the staleness policy: past max_staleness a group is discarded (onStale =
// drop) or kept behind every fresh one (wait).
#include "actors/buffer/buffer_policy.hpp"

namespace milesrt::buffer {
namespace {

class priority_policy final : public buffer_policy {
 public:
  bool admit(const held_group& g, uint64_t learner_version,
             const policy_rules& rules) const override {
    return kept_under_rule(g, learner_version, rules);
  }

  choice choose(const std::deque<held_group>& held, uint64_t count, uint64_t learner_version,
                const policy_rules& rules) const override {
    return serve_under_rule(held, count, learner_version, rules, [&](size_t a, size_t b) {
      if (held[a].reward_spread != held[b].reward_spread)
        return held[a].reward_spread > held[b].reward_spread;
      return held[a].arrival < held[b].arrival;
    });
  }
};

}  // namespace

std::unique_ptr<buffer_policy> make_priority_policy() {
  return std::make_unique<priority_policy>();
}

}  // namespace milesrt::buffer
