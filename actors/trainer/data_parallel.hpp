#pragma once
/// Data parallelism inside a training step: every rank lays out the whole batch (the same
/// advantages, the same token count normalising the loss), runs the forward and backward of its
/// share of the micro-batches, and the flat gradient is summed over the ranks before each rank
/// takes the same AdamW step, so the ranks' weights stay equal.
///
/// What is bitwise: a rank's gradient is its micro-batches' gradients accumulated in batch order,
/// and the ranks' gradients are summed by the collective library. With 2 ranks where rank 1's
/// share is the batch's last micro-batch (2 micro-batches: one each), the sum g_0 + g_1 is the
/// very addition the 1-rank run makes, so the step's weights equal the 1-rank run's bit for bit.
/// With more micro-batches per rank, or more ranks, the additions are regrouped and the weights
/// agree within fp32 rounding (data_parallel.test.cpp states the bound it checks).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "actors/trainer/batch_layout.hpp"

namespace milesrt::dist {
class collectives;
}

namespace milesrt::trainer {

/// The micro-batches (indices into layout.micro_batches) rank `rank` of `world` runs: a
/// contiguous run, cut where the running token count (prompt + output) passes rank/world of the
/// batch's, so the ranks get about equal tokens. A rank may get none (fewer micro-batches than
/// ranks).
std::vector<size_t> rank_micro_batches(const batch_layout& layout,
                                       const std::vector<train_sequence>& batch, int rank,
                                       int world);

/// Sums the flat gradient `grad` over the group's ranks, in buckets of at most `bucket_bytes`, and
/// returns whether every rank's losses were finite (when one was not, every rank skips the step
/// and the gradient is left alone).
bool sum_gradients(dist::collectives& group, const at::Tensor& grad, bool finite,
                   int64_t bucket_bytes);

}  // namespace milesrt::trainer
