#pragma once
/// The trainer's data-parallel ranks (rank 0 is the actor's own trainer core), the test hook that
/// makes a rank fail, and the train/rollout agreement check after a step.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "actors/lib/rl/builtin.hpp"
#include "actors/trainer/trainer_state.hpp"
#include "milesrt/trainer.capnp.h"

namespace milesrt::trainer {

/// After a step: in the trueOnPolicy mode any difference between the engine's and the trainer's
/// log-probs of the tokens sampled under the weights the trainer held is an error; outside it, a
/// difference above the alarm's threshold is a warning line and counted.
void check_agreement(trainer_state& st, uint64_t step, std::map<std::string, double>& m);

/// Reads MILESRT_TEST_RANK_DIES ("R:S", R >= 1) into `st`, the one place it is read.
void read_rank_fault(trainer_state& st);

/// Ranks 1 .. dataParallel-1 of a data-parallel trainer, each with its own copy of the model,
/// joined with this thread as rank 0 (the store on storeHost:storePort, a free port when 0).
std::unique_ptr<rank_pool> start_ranks(schema::TrainerParams::Reader p, const trainer_options& o,
                                       std::shared_ptr<const rl::registries> losses);

/// Runs `own` on this actor's trainer (rank 0) and, with data parallelism, `job` on every other
/// rank's at the same time (each rank one intra-op thread).
void on_every_rank(trainer_state& st, const std::function<void(policy_trainer&)>& job,
                   const std::function<void()>& own);

}  // namespace milesrt::trainer
