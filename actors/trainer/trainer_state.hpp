#pragma once
/// The trainer actor's state (trainer_kind.cpp), shared by the files its jobs are split into.

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "actors/lib/llm/text_codec.hpp"
#include "actors/lib/tasks/jsonl_dataset.hpp"
#include "actors/lib/weights/local_versions.hpp"
#include "actors/trainer/rank_pool.hpp"
#include "actors/trainer/trainer_core.hpp"

namespace milesrt::trainer {

struct eval_settings {
  std::vector<tasks::data_record> records;
  uint32_t interval = 0, patience = 0, min_steps = 0;
  int64_t max_new_tokens = 16;
  size_t limit = 0;
  std::filesystem::path export_dir;
  std::FILE* progress = nullptr;  ///< where evaluations report progress (null: none)
};

struct trainer_state {
  /// dataParallel > 1: ranks 1 .. N-1 (rank 0 is `core`, this actor's own). Declared before
  /// `core`, whose options point at the pool's group: the trainer goes first.
  std::unique_ptr<rank_pool> ranks;
  std::unique_ptr<policy_trainer> core;
  std::filesystem::path
      source_dir;  ///< the model folder training started from (its tokenizer files)
  std::shared_ptr<llm::text_codec> codec;
  std::string name;
  /// This process's weights registry: the publisher and colocated engines read the versions
  /// this trainer announces there.
  std::shared_ptr<weights::local_versions> versions;
  uint64_t version = 0;
  uint64_t total_steps = 0;
  eval_settings eval;
  double best_accuracy = -1;
  uint64_t best_step = 0;
  uint32_t evals_since_best = 0;
  /// Tests only (MILESRT_TEST_RANK_DIES=R:S, docs/testing.md): rank R throws in the S-th step
  /// this trainer takes in its process (a count that starts again after a resume); 0: never.
  int fault_rank = 0;
  uint64_t fault_step = 0;
  uint64_t steps_taken = 0;
  /// Train/rollout agreement: the alarm's threshold (0: off), the trueOnPolicy mode, and the
  /// alarms raised since this trainer started.
  double logprob_alarm = 0;
  bool true_on_policy = false;
  uint64_t alarms = 0;
};

}  // namespace milesrt::trainer
