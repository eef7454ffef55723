#pragma once
/// What the update phase of a training step (update.cpp: loss, backward, optimizer steps) leaves
/// for the step's metrics.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace milesrt::trainer {

struct update_totals {
  /// Per-metric sums over micro-batches: RL metrics weighted by their token counts (divided by
  /// weight_sum later), "loss" and "sft_loss" plain sums over all updates.
  std::map<std::string, double> sums;
  double weight_sum = 0;
  uint64_t skipped = 0;          ///< optimizer steps skipped (non-finite loss or gradient)
  double grad_norm = 0, lr = 0;  ///< of the last optimizer step
  std::vector<at::Tensor> first_logprobs;  ///< the first update's log-probs, per micro-batch
  /// With data parallelism: the sequences of this rank's micro-batches, in order (what
  /// first_logprobs covers); empty: every sequence.
  std::vector<size_t> own_sequences;
  size_t own_micro_batches = 0;  ///< how many micro-batches this rank ran
};

}  // namespace milesrt::trainer
