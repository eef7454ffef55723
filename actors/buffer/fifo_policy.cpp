// fifo: the groups in the order they arrived. Staleness is the schedule's: its admission keeps it
// bounded (onStale = wait), or the buffer drops what went past the bound before any policy chooses
// (onStale = drop), as the driver's own queue would.
#include "actors/buffer/buffer_policy.hpp"

namespace milesrt::buffer {
namespace {

class fifo_policy final : public buffer_policy {
 public:
  choice choose(const std::deque<held_group>& held, uint64_t count, uint64_t learner_version,
                const policy_rules& rules) const override {
    choice c;
    for (size_t i = 0; i < held.size() && c.serve.size() < count; ++i) {
      c.serve.push_back(i);
      if (staleness_of(held[i], learner_version) > rules.max_staleness) c.stale_served++;
    }
    return c;
  }
};

}  // namespace

std::unique_ptr<buffer_policy> make_fifo_policy() { return std::make_unique<fifo_policy>(); }

}  // namespace milesrt::buffer
