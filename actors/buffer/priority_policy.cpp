// priority: the groups with the largest reward spread (the population standard deviation of their
// samples' rewards: the most GRPO signal) first, ties in arrival order. A group with uniform
// rewards waits behind every group with a spread, so that it does not wait forever the staleness
// rule applies as in the staleness policy: past max_staleness a group is discarded (whenStale =
// drop) or kept behind every fresh one (wait).
#include <algorithm>

#include "actors/buffer/buffer_policy.hpp"

namespace milesrt::buffer {
namespace {

class priority_policy final : public buffer_policy {
 public:
  bool admit(const held_group& g, uint64_t learner_version, const policy_rules& rules) const override {
    return !rules.drop_stale || staleness_of(g, learner_version) <= rules.max_staleness;
  }

  choice choose(const std::deque<held_group>& held, uint64_t count, uint64_t learner_version,
                const policy_rules& rules) const override {
    choice c;
    std::vector<size_t> fresh, stale;
    for (size_t i = 0; i < held.size(); ++i) {
      if (staleness_of(held[i], learner_version) <= rules.max_staleness) {
        fresh.push_back(i);
      } else if (rules.drop_stale) {
        c.drop.push_back(i);
      } else {
        stale.push_back(i);
      }
    }
    auto larger_spread_first = [&](size_t a, size_t b) {
      if (held[a].reward_spread != held[b].reward_spread) return held[a].reward_spread > held[b].reward_spread;
      return held[a].arrival < held[b].arrival;
    };
    std::stable_sort(fresh.begin(), fresh.end(), larger_spread_first);
    std::stable_sort(stale.begin(), stale.end(), larger_spread_first);
    for (size_t i : fresh) {
      if (c.serve.size() == count) break;
      c.serve.push_back(i);
    }
    for (size_t i : stale) {
      if (c.serve.size() == count) break;
      c.serve.push_back(i);
      c.stale_served++;
    }
    return c;
  }
};

}  // namespace

std::unique_ptr<buffer_policy> make_priority_policy() { return std::make_unique<priority_policy>(); }

}  // namespace milesrt::buffer
