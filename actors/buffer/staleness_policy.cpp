// staleness: a group past max_staleness (learner version - its oldest token's version) is discarded
// and counted (drop), or kept waiting behind every fresher group and served only when the batch
// cannot be filled without it (wait; counted when served). Among the fresh ones, the oldest version
// goes first (then arrival order), so that a group is used before it goes stale.
#include "actors/buffer/buffer_policy.hpp"

namespace milesrt::buffer {
namespace {

class staleness_policy final : public buffer_policy {
 public:
  bool admit(const held_group& g, uint64_t learner_version,
             const policy_rules& rules) const override {
    return kept_under_rule(g, learner_version, rules);
  }

  choice choose(const std::deque<held_group>& held, uint64_t count, uint64_t learner_version,
                const policy_rules& rules) const override {
    return serve_under_rule(held, count, learner_version, rules, [&](size_t a, size_t b) {
      if (held[a].item.min_version != held[b].item.min_version)
        return held[a].item.min_version < held[b].item.min_version;
      return held[a].arrival < held[b].arrival;
    });
  }
};

}  // namespace

std::unique_ptr<buffer_policy> make_staleness_policy() {
  return std::make_unique<staleness_policy>();
}

}  // namespace milesrt::buffer
