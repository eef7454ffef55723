#include "runtime/driver/bounded_staleness_policy.hpp"

#include <algorithm>

#include "runtime/driver/staleness.hpp"

namespace milesrt::runtime {

uint64_t bounded_staleness_policy::admissible(const schedule_view& v) const {
  const uint64_t batch = v.batch_size;
  if (drop_stale_) {
    // Generation keeps a window of work open; what arrives too old is discarded.
    const uint64_t window = (max_staleness_ + 1) * batch;
    const uint64_t open = v.in_flight + v.producing + v.buffered;
    return open >= window ? 0 : std::min<uint64_t>(window - open, batch);
  }
  const uint64_t limit = (max_staleness_ + v.published + 1) * batch;
  const uint64_t used = v.accepted + v.dropped_stale + v.in_flight + v.producing;
  return used >= limit ? 0 : std::min<uint64_t>(limit - used, batch);
}

arrival_verdict bounded_staleness_policy::on_arrival(uint64_t learner_version,
                                                     uint64_t item_min_version) const {
  if (drop_stale_ && staleness(learner_version, item_min_version) > max_staleness_) {
    return arrival_verdict::drop_stale;
  }
  return arrival_verdict::accept;
}

bool bounded_staleness_policy::batch_ready(const schedule_view& v) const {
  return v.buffered >= v.batch_size;
}

take_verdict bounded_staleness_policy::on_take(uint64_t learner_version,
                                               uint64_t item_min_version) const {
  if (staleness(learner_version, item_min_version) <= max_staleness_) return take_verdict::keep;
  return drop_stale_ ? take_verdict::drop_stale : take_verdict::keep_stale;
}

}  // namespace milesrt::runtime
