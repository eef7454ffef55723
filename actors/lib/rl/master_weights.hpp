#pragma once
/// What the learners (the policy trainer, the critic) share around AdamW: fp32 master weights
/// beside a model's flat buffer, the check that the weights are still finite after a step, and the
/// optimizer's checkpoint files (dir/optimizer.bin, and dir/master.bin for models that are not
/// fp32), written and read back bitwise.

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

/// Writes `adam`'s state to dir/optimizer.bin and, when `with_master`, the fp32 `master` to
/// dir/master.bin (its raw bytes); throws naming the file (and errno's reason) when a write fails.
void save_optimizer_state(const std::filesystem::path& dir, const adamw& adam,
                          const at::Tensor& master, bool with_master);

/// Reads dir/optimizer.bin into `adam`; throws naming the file.
void load_optimizer_state(const std::filesystem::path& dir, adamw& adam);

/// dir/master.bin as `numel` fp32 values on the CPU; throws unless it holds exactly that many.
at::Tensor read_master(const std::filesystem::path& dir, int64_t numel);

}  // namespace milesrt::rl
