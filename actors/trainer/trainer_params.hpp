#pragma once
/// The trainer kind's params: their checks, and the trainer core's options made from them.

#include <capnp/dynamic.h>

#include <cstdint>
#include <string>
#include <vector>

#include "actors/lib/rl/builtin.hpp"
#include "actors/trainer/trainer_core.hpp"
#include "milesrt/trainer.capnp.h"
#include "runtime/core/kind.hpp"

namespace milesrt::trainer {

/// The trainer core's options from the graph's params (`steps`: the run's training steps).
trainer_options options_of(schema::TrainerParams::Reader p, uint64_t steps);

/// Checks of the params beyond their types: the model folder, the loss and estimator names (in
/// `losses`), finite numbers, ranges, data parallelism, LoRA and the trueOnPolicy mode.
problem_list check_trainer_params(capnp::DynamicStruct::Reader reader,
                                  const rl::registries& losses);

/// Checks against the graph: no more ranks than a step's groups.
problem_list check_in_graph(capnp::DynamicStruct::Reader reader, const runtime::actor_in_graph& g);

}  // namespace milesrt::trainer
