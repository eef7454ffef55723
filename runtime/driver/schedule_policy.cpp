#include "runtime/driver/schedule_policy.hpp"

#include "runtime/driver/bounded_staleness_policy.hpp"
#include "runtime/driver/sync_policy.hpp"

namespace milesrt::runtime {

std::unique_ptr<schedule_policy> make_schedule_policy(const schedule_plan& plan) {
  if (plan.async) {
    return std::make_unique<bounded_staleness_policy>(plan.max_staleness, plan.drop_stale);
  }
  return std::make_unique<sync_policy>();
}

}  // namespace milesrt::runtime
