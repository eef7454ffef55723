#pragma once
/// The engine's pause controller: what a weight update does to the sequences in flight (abort,
/// retract or keep them, engine_types.hpp's pause_mode), the weight version new tokens carry, and
/// the KV pool given back for colocated training and taken again.

#include <cstdint>
#include <vector>

#include "actors/lib/serving/engine_types.hpp"
#include "actors/lib/serving/model_runner.hpp"
#include "actors/lib/serving/scheduler.hpp"

namespace milesrt::serving {

class pause_controller {
 public:
  pause_controller(scheduler& sched, model_runner& runner) : scheduler_(sched), runner_(runner) {}
  /// See engine::update_weights.
  std::vector<sample> update_weights(uint64_t version, pause_mode mode);
  /// See engine::release_kv.
  std::vector<sample> release_kv(pause_mode mode);
  /// See engine::retake_kv.
  void retake_kv();
  /// Throws while the KV pool is released (a step needs it).
  void check_can_step() const;
  uint64_t version() const { return version_; }
  bool kv_released() const { return kv_released_; }

 private:
  scheduler& scheduler_;
  model_runner& runner_;
  uint64_t version_ = 0;
  bool kv_released_ = false;
};

}  // namespace milesrt::serving
