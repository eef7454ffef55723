#include "examples/custom_buffer_policy/freshest.hpp"

#include <algorithm>

namespace milesrt::examples {
namespace {
using buffer::choice;
using buffer::held_group;
using buffer::policy_rules;
using buffer::staleness_of;

class freshest final : public buffer::buffer_policy {
 public:
  bool admit(const held_group& g, uint64_t learner_version,
             const policy_rules& rules) const override {
    return staleness_of(g, learner_version) <= rules.max_staleness;
  }

  choice choose(const std::deque<held_group>& held, uint64_t count, uint64_t learner_version,
                const policy_rules& rules) const override {
    choice c;
    std::vector<size_t> fresh;
    for (size_t i = 0; i < held.size(); ++i) {
      if (staleness_of(held[i], learner_version) > rules.max_staleness) {
        c.drop.push_back(i);
      } else {
        fresh.push_back(i);
      }
    }
    std::stable_sort(fresh.begin(), fresh.end(), [&](size_t a, size_t b) {
      if (held[a].item.min_version != held[b].item.min_version)
        return held[a].item.min_version > held[b].item.min_version;
      return held[a].arrival > held[b].arrival;
    });
    for (size_t i : fresh) {
      if (c.serve.size() == count) break;
      c.serve.push_back(i);
    }
    return c;
  }
};

}  // namespace

std::unique_ptr<buffer::buffer_policy> make_freshest_policy() {
  return std::make_unique<freshest>();
}

}  // namespace milesrt::examples
