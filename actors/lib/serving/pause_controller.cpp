#include "actors/lib/serving/pause_controller.hpp"

#include <stdexcept>

namespace milesrt::serving {

std::vector<sample> pause_controller::update_weights(uint64_t version, pause_mode mode) {
  std::vector<sample> aborted;
  version_ = version;
  if (mode == pause_mode::abort) {
    aborted = scheduler_.abort_all();
  } else if (mode == pause_mode::retract) {
    scheduler_.retract_all();
  }
  // Cached KV belongs to the old weights.
  scheduler_.flush_prefix();
  return aborted;
}

std::vector<sample> pause_controller::release_kv(pause_mode mode) {
  if (kv_released_) return {};
  // The sequences' KV goes with the pool: abort them, or requeue them to be recomputed.
  auto aborted =
      update_weights(version_, mode == pause_mode::abort ? pause_mode::abort : pause_mode::retract);
  runner_.release_kv();
  kv_released_ = true;
  return aborted;
}

void pause_controller::retake_kv() {
  if (!kv_released_) return;
  runner_.retake_kv();
  kv_released_ = false;
}

void pause_controller::check_can_step() const {
  if (kv_released_) {
    throw std::logic_error(
        "rollout engine: step() while the KV pool is released (retake_kv() first)");
  }
}

}  // namespace milesrt::serving
