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

#include "actors/lib/rl/master_weights.hpp"
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

/// ZeRO-1 (trainer_options::shard_optimizer): the flat gradient `grad` reduce-scattered over the
/// ranks: `out` gets this rank's slice `mine` of the ranks' summed gradient (the same additions as
/// sum_gradients, so with 2 ranks the same bits). Returns whether every rank's losses were finite
/// (when not, nothing is exchanged and `out` is left alone).
bool scatter_gradients(dist::collectives& group, const at::Tensor& grad, bool finite,
                       const rl::shard_range& mine, at::Tensor& out);

/// The L2 norm of the whole gradient (`numel` values) from the slices `mine` the ranks hold, as a
/// 0-dim fp32 tensor on `slice`'s device: each rank's fp64 block sums of squares are gathered and
/// summed as rl::global_l2_norm sums the whole buffer's, so the norm (and the clipping factor) is
/// the unsharded trainer's bit for bit (actors/lib/rl/grad_norm.hpp).
at::Tensor global_norm(dist::collectives& group, const at::Tensor& slice,
                       const rl::shard_range& mine, int64_t numel);

/// ZeRO-1: every rank's updated fp32 master slice, all-gathered into `weights` (the model's flat
/// buffer, in its own dtype: bf16 models exchange bf16).
void gather_weights(dist::collectives& group, const at::Tensor& master, const rl::shard_range& mine,
                    const at::Tensor& weights);

}  // namespace milesrt::trainer
