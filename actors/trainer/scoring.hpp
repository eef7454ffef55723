#pragma once
/// The training forward: log-probs and entropies of the trained tokens of some sequences of a
/// batch, in one packed forward, with the rollout's experts replayed on MoE models.

#include <functional>
#include <vector>

#include "actors/lib/llm/model.hpp"
#include "actors/trainer/trainer_core.hpp"

namespace milesrt::trainer {

/// A micro-batch's loss from its scores (activation checkpointing runs its backward itself).
using loss_head = std::function<at::Tensor(const llm::token_scores&)>;

/// How a training forward treats a model's LoRA adapters (none: nothing to treat).
struct adapter_pass {
  bool off = false;           ///< the base alone: the reference model
  bool dropout = false;       ///< the adapters' dropout (gradient forwards)
  uint64_t dropout_seed = 0;  ///< its masks' seed
};

/// Scores (on the CPU) of the output tokens of the sequences `idx` of `batch`, in batch order, at
/// o.temperature. With o.routing_replay on an MoE model, the forward uses the experts the rollout
/// recorded (all sequences of the micro-batch carry them, or none; a wrong count throws
/// std::invalid_argument naming the sequence). With `head` set, the forward calls it with the
/// scores (autograd on) and back-propagates its loss itself; the scores come back detached.
llm::token_scores score_sequences(const llm::decoder& model,
                                  const std::vector<train_sequence>& batch,
                                  const std::vector<size_t>& idx, const trainer_options& o,
                                  const loss_head& head = nullptr, adapter_pass adapters = {});

}  // namespace milesrt::trainer
