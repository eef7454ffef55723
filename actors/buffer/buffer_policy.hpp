#pragma once
/// The policy of a `trajectory_buffer`: which held groups make the learner's next batch, and which
/// are discarded. One file per policy (fifo_policy.cpp, staleness_policy.cpp, priority_policy.cpp);
/// a policy is found by name in a registry that the app builds and offers to plugins, so that a
/// plugin adds one with
///   ctx->extensions->get<buffer::policy_registry>(buffer::kPolicyExtension).add(name, factory);

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "actors/lib/rl/registry.hpp"
#include "runtime/core/messages.hpp"

namespace milesrt::buffer {

/// One group the buffer holds, with what policies look at.
struct held_group {
  runtime::envelope item;
  uint64_t arrival = 0;      ///< put order: 0, 1, 2, ... over the run (checkpointed)
  double reward_spread = 0;  ///< the population standard deviation of its samples' rewards
};

/// The graph's settings of a policy (TrajectoryBufferParams in schemas/buffer.capnp).
struct policy_rules {
  uint64_t max_staleness = 1;  ///< versions a served group may lag the learner
  bool drop_stale = true;      ///< past it: discarded (true) or kept waiting behind fresher groups
};

/// What a policy decides when the learner asks for a batch.
struct choice {
  std::vector<size_t> serve;  ///< indices into the held groups, in the order served
  std::vector<size_t> drop;   ///< indices discarded as stale (whatever happens to the batch)
  uint64_t stale_served = 0;  ///< of `serve`, groups past max_staleness
};

class buffer_policy {
 public:
  virtual ~buffer_policy() = default;
  /// Whether an arriving group is held (false: discarded as stale and counted). Default: held.
  virtual bool admit(const held_group& g, uint64_t learner_version,
                     const policy_rules& rules) const;
  /// The learner (at `learner_version`) asks for `count` groups. Fewer than `count` in `serve`
  /// means not enough are fit to train: nothing is served (the discards still happen).
  virtual choice choose(const std::deque<held_group>& held, uint64_t count,
                        uint64_t learner_version, const policy_rules& rules) const = 0;
};

using policy_registry = rl::registry<buffer_policy>;

/// The name under which milesrt offers plugins the registry of buffer policies.
inline constexpr const char* kPolicyExtension = "milesrt.buffer.policies";

/// fifo, staleness, priority.
policy_registry builtin_policies();

// One factory per built-in, each defined in its own file.
std::unique_ptr<buffer_policy> make_fifo_policy();
std::unique_ptr<buffer_policy> make_staleness_policy();
std::unique_ptr<buffer_policy> make_priority_policy();

/// Versions between an item's oldest part and the learner (0 when not older).
inline uint64_t staleness_of(const held_group& g, uint64_t learner_version) {
  return learner_version > g.item.min_version ? learner_version - g.item.min_version : 0;
}

/// The staleness rule as a policy applies it: true when `g` is kept (within max_staleness, or
/// onStale = wait).
bool kept_under_rule(const held_group& g, uint64_t learner_version, const policy_rules& rules);

/// A choice under the staleness rule: groups within max_staleness in `first` order, then (onStale
/// = wait) those past it in the same order, counted as stale_served; with onStale = drop those
/// past it are discarded. `first(a, b)`: whether held[a] is served before held[b].
choice serve_under_rule(const std::deque<held_group>& held, uint64_t count,
                        uint64_t learner_version, const policy_rules& rules,
                        const std::function<bool(size_t, size_t)>& first);

}  // namespace milesrt::buffer
