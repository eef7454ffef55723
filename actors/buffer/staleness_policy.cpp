// staleness: a group past max_staleness (learner version - its oldest token's version) is discarded
// and counted (drop), or kept waiting behind every fresher group and served only when the batch
// cannot be filled without it (wait; counted when served). Among the fresh ones, the oldest version
// goes first (then arrival order), so that a group is used before it goes stale.
#include <algorithm>

#include "actors/buffer/buffer_policy.hpp"

namespace milesrt::buffer {
namespace {

class staleness_policy final : public buffer_policy {
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
    auto older_first = [&](size_t a, size_t b) {
      if (held[a].item.min_version != held[b].item.min_version)
        return held[a].item.min_version < held[b].item.min_version;
      return held[a].arrival < held[b].arrival;
    };
    std::stable_sort(fresh.begin(), fresh.end(), older_first);
    std::stable_sort(stale.begin(), stale.end(), older_first);
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

std::unique_ptr<buffer_policy> make_staleness_policy() { return std::make_unique<staleness_policy>(); }

}  // namespace milesrt::buffer
