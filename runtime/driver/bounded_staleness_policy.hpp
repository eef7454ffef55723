#pragma once
/// The `async` schedule: bounded staleness. Generation runs ahead of the learner by at most
/// `max_staleness` versions; an item older than that is either trained anyway and counted as a
/// violation (`onStale = wait`, which admission keeps from happening) or dropped (`onStale =
/// drop`).

#include "runtime/driver/schedule_policy.hpp"

namespace milesrt::runtime {

class bounded_staleness_policy final : public schedule_policy {
 public:
  bounded_staleness_policy(uint64_t max_staleness, bool drop_stale)
      : max_staleness_(max_staleness), drop_stale_(drop_stale) {}

  /// `wait`: the admission rule AReaL uses, counted in items and with the version the stages have
  /// received: admit while (max_staleness + published + 1) * batch exceeds what was accepted,
  /// dropped, or is in flight. `drop`: keep a window of (max_staleness + 1) * batch items open
  /// (in flight, being produced or buffered). At most one batch at a time either way.
  uint64_t admissible(const schedule_view& v) const override;
  /// `drop`: an item already too stale is dropped; `wait`: every item is kept.
  arrival_verdict on_arrival(uint64_t learner_version, uint64_t item_min_version) const override;
  /// A full buffer; generation goes on meanwhile.
  bool batch_ready(const schedule_view& v) const override;
  /// An item that became too stale while it waited is dropped (`drop`) or kept as a violation.
  take_verdict on_take(uint64_t learner_version, uint64_t item_min_version) const override;
  /// No: what is left waits for the next step.
  bool discards_surplus() const override { return false; }

  uint64_t max_staleness() const { return max_staleness_; }
  bool drop_stale() const { return drop_stale_; }

 private:
  uint64_t max_staleness_;
  bool drop_stale_;
};

}  // namespace milesrt::runtime
