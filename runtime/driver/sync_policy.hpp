#pragma once
/// The `sync` schedule: lockstep. A step's items are generated with the learner's version, the
/// learner trains once all of them are done, and no item crosses a version.

#include "runtime/driver/schedule_policy.hpp"

namespace milesrt::runtime {

class sync_policy final : public schedule_policy {
 public:
  /// One batch per step, admitted once everything of the previous step is done and the new
  /// version has reached every stage; more (over-sampling) when filters left the batch short.
  uint64_t admissible(const schedule_view& v) const override;
  /// Every arriving item is kept: it was made with the learner's version.
  arrival_verdict on_arrival(uint64_t learner_version, uint64_t item_min_version) const override;
  /// A full buffer, and the step's generation done.
  bool batch_ready(const schedule_view& v) const override;
  /// Every item is kept.
  take_verdict on_take(uint64_t learner_version, uint64_t item_min_version) const override;
  /// Yes: what over-sampling brought in beyond the batch must not cross into the next version.
  bool discards_surplus() const override { return true; }
};

}  // namespace milesrt::runtime
