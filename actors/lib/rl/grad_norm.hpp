#pragma once
/// The gradient's global L2 norm, computed so that every way of holding the gradient gets the same
/// bits: the whole flat buffer (one rank, or data-parallel ranks after an all-reduce) or a ZeRO-1
/// slice per rank (slices start at multiples of kNormBlock values, actors/lib/rl/master_weights).
///
/// The squares are summed in fp64 (a square of an fp32 or bf16 value is exact there) over blocks
/// of kNormBlock values, each block by a fixed pairwise tree of element-wise additions; the blocks'
/// sums then by a pairwise tree over the whole buffer's block count. Element-wise additions round
/// the same on every device and thread count, and the trees depend only on the buffer's length,
/// not on how many ranks computed the blocks.

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace milesrt::rl {

constexpr int64_t kNormBlock = 64;

/// The number of blocks of a flat buffer of `numel` values.
inline int64_t norm_blocks(int64_t numel) { return (numel + kNormBlock - 1) / kNormBlock; }

/// The fp64 sums of squares of `values` (flat, any floating dtype and device) per block of
/// kNormBlock values, the last one padded with zeros: norm_blocks(numel) values on its device.
at::Tensor block_sums_of_squares(const at::Tensor& values);

/// The L2 norm from the first `blocks` block sums (a longer tensor, e.g. gathered from ranks with
/// padding, is cut): a 0-dim fp32 tensor on the sums' device.
at::Tensor norm_from_block_sums(const at::Tensor& sums, int64_t blocks);

/// block_sums_of_squares then norm_from_block_sums over all of `values`.
at::Tensor global_l2_norm(const at::Tensor& values);

}  // namespace milesrt::rl
