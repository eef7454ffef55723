#pragma once
/// A schedule of the driver as a policy: what `sync` and `async` (bounded staleness) decide
/// differently. The driver does the routing, counting and training; it asks its one policy when to
/// admit, what to keep and when to train. One file per policy: sync_policy,
/// bounded_staleness_policy.

#include <cstdint>
#include <memory>

#include "runtime/driver/plan.hpp"

namespace milesrt::runtime {

/// What a policy sees of the driver when it decides: a copy taken at the moment of deciding.
struct schedule_view {
  uint64_t batch_size = 1;
  uint64_t version = 0;        ///< the learner's version
  uint64_t published = 0;      ///< the newest version every stage has received
  uint64_t in_flight = 0;      ///< admitted items still on their way (queued or in requests)
  uint64_t producing = 0;      ///< items asked of the source, not yet answered
  uint64_t buffered = 0;       ///< items waiting at the learner's buffer
  uint64_t accepted = 0;       ///< items accepted into the buffer so far (counter)
  uint64_t dropped_stale = 0;  ///< items dropped as stale so far (counter)
  /// Nothing in flight or being produced, no publication under way, the learner idle.
  bool quiescent = false;
};

/// What becomes of an item that arrives at the learner's buffer.
enum class arrival_verdict {
  accept,      ///< into the buffer
  drop_stale,  ///< discarded: too stale already
};

/// What becomes of a buffered item as the learner's batch is taken.
enum class take_verdict {
  keep,        ///< into the batch
  keep_stale,  ///< into the batch, beyond the staleness bound (a stale violation)
  drop_stale,  ///< discarded: it became too stale while it waited
};

/// One schedule. Stateless: every decision depends only on its arguments and the plan.
class schedule_policy {
 public:
  virtual ~schedule_policy() = default;
  /// How many new items the source may be asked for now; 0: none.
  virtual uint64_t admissible(const schedule_view& v) const = 0;
  /// An item made with model versions >= `item_min_version` arrives while the learner holds
  /// `learner_version`.
  virtual arrival_verdict on_arrival(uint64_t learner_version, uint64_t item_min_version) const = 0;
  /// Whether the learner may take its next batch from the buffer now.
  virtual bool batch_ready(const schedule_view& v) const = 0;
  /// A buffered item is taken for the batch of a learner that holds `learner_version`.
  virtual take_verdict on_take(uint64_t learner_version, uint64_t item_min_version) const = 0;
  /// Whether what is left in the buffer once a batch is taken is discarded (counted as surplus).
  virtual bool discards_surplus() const = 0;
};

/// The most admitted items a schedule keeps open at once (in flight or in the learner's buffer):
/// batch_size in sync, (max_staleness + 1) x batch_size in async. An edge of capacity 0 holds this.
uint64_t schedule_window(const schedule_plan& plan, uint64_t batch_size);

/// The policy of a graph's schedule: `sync` or bounded staleness (`async`).
std::unique_ptr<schedule_policy> make_schedule_policy(const schedule_plan& plan);

}  // namespace milesrt::runtime
