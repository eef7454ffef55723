// What every buffer policy shares: the default admit, the staleness rule (serve_under_rule), and
// the registry of the built-in policies (one file each: fifo_policy, staleness_policy,
// priority_policy).
#include "actors/buffer/buffer_policy.hpp"

#include <algorithm>

namespace milesrt::buffer {

bool buffer_policy::admit(const held_group&, uint64_t, const policy_rules&) const { return true; }

bool kept_under_rule(const held_group& g, uint64_t learner_version, const policy_rules& rules) {
  return !rules.drop_stale || staleness_of(g, learner_version) <= rules.max_staleness;
}

choice serve_under_rule(const std::deque<held_group>& held, uint64_t count,
                        uint64_t learner_version, const policy_rules& rules,
                        const std::function<bool(size_t, size_t)>& first) {
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
  std::stable_sort(fresh.begin(), fresh.end(), first);
  std::stable_sort(stale.begin(), stale.end(), first);
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

policy_registry builtin_policies() {
  policy_registry r{"buffer policy"};
  r.add("fifo", make_fifo_policy);
  r.add("staleness", make_staleness_policy);
  r.add("priority", make_priority_policy);
  return r;
}

}  // namespace milesrt::buffer
