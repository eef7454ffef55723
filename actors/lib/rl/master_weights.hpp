#pragma once
/// What the learners (the policy trainer, the critic) share around AdamW: fp32 master weights
/// beside a model's flat buffer, the check that the weights are still finite after a step, and the
/// optimizer's checkpoint files (dir/optimizer.bin, and dir/master.bin for models that are not
/// fp32), written and read back bitwise; and, for a sharded optimizer (ZeRO-1: each of N ranks
/// keeps 1/N of the master weights and moments), each rank's slice and its files.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "actors/lib/rl/optimizer.hpp"

namespace milesrt::rl {

/// The fp32 master weights of a model's flat parameter buffer: the buffer itself when it is fp32
/// (the optimizer then steps the model's own weights), else an fp32 copy beside it.
at::Tensor fp32_master(const at::Tensor& buffer);

/// Whether every value of `t` is finite: one reduction pass (a non-finite value makes the sum
/// non-finite); only a non-finite sum is looked at value by value.
bool all_finite(const at::Tensor& t);

/// Throws std::runtime_error "<who>: the weights are no longer finite after optimizer step
/// <step><tail>" unless all_finite(weights).
void check_finite_weights(const at::Tensor& weights, const std::string& who, uint64_t step,
                          const std::string& tail = "");
/// The same from a step's own flag (adamw::step_info::nonfinite) where it has one: one int read
/// instead of a pass over the weights.
void check_finite_weights(const at::Tensor& weights, const at::Tensor& nonfinite_flag,
                          const std::string& who, uint64_t step, const std::string& tail = "");

/// Writes `adam`'s state to dir/optimizer.bin and, when `with_master`, the fp32 `master` to
/// dir/master.bin (its raw bytes); throws naming the file (and errno's reason) when a write fails.
void save_optimizer_state(const std::filesystem::path& dir, const adamw& adam,
                          const at::Tensor& master, bool with_master);

/// Reads dir/optimizer.bin into `adam`; throws naming the file.
void load_optimizer_state(const std::filesystem::path& dir, adamw& adam);

/// dir/master.bin as `numel` fp32 values on the CPU; throws unless it holds exactly that many.
at::Tensor read_master(const std::filesystem::path& dir, int64_t numel);

/// ZeRO-1: the slice of a flat buffer of `numel` values that rank `rank` of `world` owns. Every
/// rank's slot in the collectives' buffers is `stride` values, a multiple of 64, so a slice starts
/// where the whole buffer's vectorised loops would (its element-wise arithmetic rounds as the
/// whole buffer's does); the last ranks' slices are shorter, or empty.
struct shard_range {
  int64_t begin = 0, end = 0;  ///< [begin, end) of the flat buffer
  int64_t stride = 0;          ///< each rank's slot: world * stride >= numel
  int64_t length() const { return end - begin; }
};
shard_range shard_of(int64_t numel, int rank, int world);

/// "optimizer.rank-1-of-2.bin": the name of a sharded checkpoint's file `what` of one rank.
std::string shard_file(const std::string& what, int rank, int world);

/// Writes rank `rank` of `world`'s AdamW state and fp32 master slice to
/// dir/optimizer.rank-R-of-N.bin and dir/master.rank-R-of-N.bin.
void save_optimizer_shard(const std::filesystem::path& dir, const adamw& adam,
                          const at::Tensor& master, int rank, int world);

/// Reads them back into `adam` and `master` (bitwise). Throws naming the directory when the
/// checkpoint holds no shards (written unsharded: optimizer.bin) or shards of another number of
/// ranks, saying which dataParallel resumes it.
void load_optimizer_shard(const std::filesystem::path& dir, adamw& adam, at::Tensor& master,
                          int rank, int world);

/// The number of ranks a sharded checkpoint in `dir` was written by (from its file names), or 0
/// when it holds none.
int checkpoint_shards(const std::filesystem::path& dir);

}  // namespace milesrt::rl
