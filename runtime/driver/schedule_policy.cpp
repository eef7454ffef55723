#include "runtime/driver/schedule_policy.hpp"

#include "runtime/driver/bounded_staleness_policy.hpp"
#include "runtime/driver/sync_policy.hpp"

namespace milesrt::runtime {

uint64_t schedule_window(const schedule_plan& plan, uint64_t batch_size) {
  return plan.async ? (uint64_t(plan.max_staleness) + 1) * batch_size : batch_size;
}

std::unique_ptr<schedule_policy> make_schedule_policy(const schedule_plan& plan) {
  if (plan.async) {
    return std::make_unique<bounded_staleness_policy>(plan.max_staleness, plan.drop_stale);
  }
  return std::make_unique<sync_policy>();
}

}  // namespace milesrt::runtime
