#pragma once
/// Staleness: how many versions the learner has moved past the version an item was made with.

#include <cstdint>

namespace milesrt::runtime {

/// Versions between `item_min_version` (the oldest model version behind an item) and
/// `learner_version`; 0 for an item no older than the learner.
constexpr uint64_t staleness(uint64_t learner_version, uint64_t item_min_version) {
  return learner_version > item_min_version ? learner_version - item_min_version : 0;
}

}  // namespace milesrt::runtime
