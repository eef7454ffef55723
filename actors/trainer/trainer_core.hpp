#pragma once
/// The policy trainer without the actor around it: one optimizer step on a batch of sequences
/// (RL on scored samples, or SFT on prompt/response pairs), the AdamW state, and checkpoints.
/// The trainer kind (trainer_kind.cpp) wraps it; tests drive it directly.

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/lib/llm/model.hpp"
#include "actors/lib/rl/losses.hpp"
#include "actors/lib/rl/optimizer.hpp"

namespace milesrt::trainer {

struct trainer_options {
  std::string objective = "rl";  ///< rl | sft
  rl::advantage_options advantages;
  rl::policy_loss_options loss;
  bool kl_in_reward = false;        ///< KL to the reference as a per-token reward penalty
  double kl_reward_coef = 0;        ///< its coefficient (loss.kl names the estimator)
  bool use_rollout_logprobs = false;
  bool routing_replay = true;
  double temperature = 1.0;
  rl::adamw_options optimizer;
  int64_t micro_batch_tokens = 4096;
  uint32_t updates_per_step = 1;
  /// Keep only each layer's input in the forward and compute the layers again in the backward.
  bool activation_checkpointing = false;
};

/// One sequence of a batch: the prompt, the trained tokens (a sampled output, or an SFT target),
/// and what earlier stages attached to it.
struct train_sequence {
  std::vector<int64_t> prompt, output;
  std::vector<float> rollout_logprobs;  ///< per output token (RL)
  std::vector<float> ref_logprobs;      ///< per output token, when a reference model ran
  std::vector<float> values;            ///< per output token, when a critic ran (GAE)
  std::vector<int64_t> experts;         ///< MoE: the rollout's routing (see sample_msg)
  float reward = 0;
  int64_t group = 0;                    ///< samples of one prompt share a group
};

class policy_trainer {
 public:
  policy_trainer(std::unique_ptr<llm::decoder> model, trainer_options options);

  /// One training step (updates_per_step optimizer steps) on `batch`. Metrics: the loss terms,
  /// pg_clipfrac, ppo_kl, entropy, grad_norm, lr, train_tokens_per_s, train/rollout log-prob
  /// difference, TIS/MIS statistics, skipped_steps. Throws when the weights become non-finite.
  std::map<std::string, double> train(const std::vector<train_sequence>& batch);

  llm::decoder& model() { return *model_; }
  const trainer_options& options() const { return options_; }
  uint64_t optimizer_steps() const { return adam_->steps(); }

  /// Writes the model (HF folder: config.json + safetensors) to dir/model, the optimizer state to
  /// dir/optimizer.bin and, for bf16 models, the fp32 master weights to dir/master.bin; load()
  /// reads them back (bitwise).
  void save(const std::filesystem::path& dir) const;
  void load(const std::filesystem::path& dir);

 private:
  std::unique_ptr<llm::decoder> model_;
  trainer_options options_;
  at::Tensor master_;  ///< fp32 master weights (the buffer itself when the model is fp32)
  std::unique_ptr<rl::adamw> adam_;
};

}  // namespace milesrt::trainer
