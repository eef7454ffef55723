#include "runtime/driver/sync_policy.hpp"

namespace milesrt::runtime {

uint64_t sync_policy::admissible(const schedule_view& v) const {
  if (!v.quiescent || v.published != v.version) return 0;
  return v.buffered >= v.batch_size ? 0 : v.batch_size - v.buffered;
}

arrival_verdict sync_policy::on_arrival(uint64_t, uint64_t) const {
  return arrival_verdict::accept;
}

bool sync_policy::batch_ready(const schedule_view& v) const {
  return v.buffered >= v.batch_size && v.in_flight == 0 && v.producing == 0;
}

take_verdict sync_policy::on_take(uint64_t, uint64_t) const { return take_verdict::keep; }

}  // namespace milesrt::runtime
