#pragma once
/// The rollout kind's params: their checks, and the engine's configuration and sampling values
/// made from them.

#include <capnp/dynamic.h>

#include <cstdint>
#include <string>
#include <vector>

#include "actors/lib/serving/engine_types.hpp"
#include "milesrt/rollout.capnp.h"
#include "runtime/core/problem.hpp"

namespace milesrt::rollout {

/// Checks of the params beyond their types, the model folder and the LoRA section.
problem_list check_rollout_params(capnp::DynamicStruct::Reader reader);

/// The text_codec's word for the params' BOS policy.
std::string bos_word(schema::RolloutParams::BosPolicy b);

/// The engine's configuration (`cuda`: the model is on a GPU; on the CPU running sequences are
/// capped at 64).
serving::engine_config engine_config_of(schema::RolloutParams::Reader p, bool cuda);

/// The groups' sampling values; `seed` and `replica` are the run's and this replica's.
serving::sampling_params sampling_of(schema::RolloutParams::Reader p, uint64_t seed,
                                     uint32_t replica);

serving::pause_mode pause_mode_of(schema::RolloutParams::Reader p);

}  // namespace milesrt::rollout
