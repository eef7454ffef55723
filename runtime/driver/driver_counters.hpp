#pragma once
/// The driver's counters of a run: what was admitted and what became of it.

#include <array>
#include <caf/error.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/none.hpp>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>

namespace milesrt::runtime {

/// Counted by the driver; the names of `named()` are the words of metrics.jsonl and summary.json.
struct driver_counters {
  uint64_t admitted = 0;          ///< items the source was asked for and gave
  uint64_t accepted = 0;          ///< items kept at the learner's buffer
  uint64_t dropped_stale = 0;     ///< items discarded as too stale (`onStale = drop`)
  uint64_t filtered = 0;          ///< admitted items that never reached the buffer
  uint64_t surplus = 0;           ///< buffered items discarded after a lockstep batch was taken
  uint64_t stale_violations = 0;  ///< items trained beyond the staleness bound
  uint64_t restarts = 0;          ///< replicas restarted after they died
  uint64_t requeued = 0;          ///< items sent again because the replica holding them died
  uint64_t in_flight = 0;         ///< admitted items still on their way (at the moment of a record)
  uint64_t buffered = 0;          ///< items waiting in the buffer (at the moment of a record)
  /// Work items a stage answered with a bad-input error (runtime/core/failure.hpp): dropped, and
  /// the run goes on.
  uint64_t items_rejected = 0;

  static constexpr size_t count = 11;
  /// Every counter with its name, in declaration order.
  std::array<std::pair<std::string_view, uint64_t>, count> named() const;
  /// Sets the counter called `name`; false (and nothing set) for a name that is not a counter.
  bool set(std::string_view name, uint64_t value);
};

bool operator==(const driver_counters& a, const driver_counters& b);
inline bool operator!=(const driver_counters& a, const driver_counters& b) { return !(a == b); }

/// Serialized as a map from name to value (the form checkpoints had when the counters were a
/// map), so a checkpoint written before or after a counter is added still loads.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, driver_counters& x) {
  std::map<std::string, uint64_t> by_name;
  for (const auto& [name, value] : x.named()) by_name.emplace(name, value);
  auto load = caf::meta::load_callback([&]() -> caf::error {
    x = driver_counters{};
    for (const auto& [name, value] : by_name) x.set(name, value);  // unknown names: ignored
    return caf::none;
  });
  return f(caf::meta::type_name("driver_counters"), by_name, load);
}

}  // namespace milesrt::runtime
