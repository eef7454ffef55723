#pragma once
/// The packed token layout of a training batch: every output token of every sequence in one flat
/// dimension N, in batch order, and the batch cut into micro-batches by a token budget.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "actors/trainer/trainer_core.hpp"

namespace milesrt::trainer {

struct batch_layout {
  int64_t num_seqs = 0;          ///< S
  int64_t num_tokens = 0;        ///< N
  std::vector<int64_t> offsets;  ///< [S + 1]: sequence i's tokens are [offsets[i], offsets[i+1])
  at::Tensor seq_index;          ///< [N] int64
  at::Tensor mask;               ///< [N] fp32: 1 trained on, 0 context (train_sequence::mask)
  int64_t trained_tokens = 0;    ///< tokens the mask keeps (the token_mean normalizer)
  at::Tensor rollout_logprobs;   ///< [N] (RL); undefined for SFT
  at::Tensor ref_logprobs;       ///< [N] when every sequence carries them, else undefined
  at::Tensor teacher_logprobs;   ///< [N] when every sequence carries them, else undefined
  at::Tensor values;             ///< [N] when every sequence carries them, else undefined
  std::vector<std::vector<size_t>> micro_batches;  ///< sequence indices of each micro-batch

  /// The tokens of the sequences in `idx`, concatenated (undefined stays undefined).
  at::Tensor slice(const at::Tensor& t, const std::vector<size_t>& idx) const;
  /// For the tokens of the sequences in `idx`: the position of their sequence in `idx`.
  at::Tensor local_seq_index(const std::vector<size_t>& idx) const;
};

/// Index sets of micro-batches: consecutive sequences up to `budget` tokens (prompt + output);
/// a longer sequence gets a micro-batch of its own.
std::vector<std::vector<size_t>> micro_batches(const std::vector<train_sequence>& batch,
                                               int64_t budget);

/// Checks the batch (std::invalid_argument naming the sequence: empty batch, no prompt token,
/// RL log-probs that do not match the output) and lays it out.
batch_layout lay_out(const std::vector<train_sequence>& batch, bool sft,
                     int64_t micro_batch_tokens);

}  // namespace milesrt::trainer
