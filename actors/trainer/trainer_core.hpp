#pragma once
/// The policy trainer without the actor around it: one optimizer step on a batch of sequences
/// (RL on scored samples, or SFT on prompt/response pairs), the AdamW state, and checkpoints.
/// The trainer kind (trainer_kind.cpp) wraps it; tests drive it directly.

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/lib/llm/model.hpp"
#include "actors/lib/rl/builtin.hpp"
#include "actors/lib/rl/master_weights.hpp"
#include "actors/lib/rl/optimizer.hpp"

namespace milesrt::dist {
class collectives;
}

namespace milesrt::trainer {

struct trainer_options {
  std::string objective = "rl";    ///< rl | sft
  std::string estimator = "grpo";  ///< an advantage estimator's name in the registries
  rl::advantage_options advantages;
  std::string policy_loss = "ppo";  ///< a policy loss's name in the registries
  rl::policy_loss_options loss;
  bool kl_in_reward = false;  ///< KL to the reference as a per-token reward penalty
  double kl_reward_coef = 0;  ///< its coefficient (loss.kl names the estimator)
  /// LoRA: the base (adapters off) is the KL reference of a batch carrying no ref_logprobs; off,
  /// such a batch is refused when a KL term needs one.
  bool lora_base_reference = false;
  bool use_rollout_logprobs = false;
  bool routing_replay = true;
  double temperature = 1.0;
  rl::adamw_options optimizer;
  int64_t micro_batch_tokens = 4096;
  uint32_t updates_per_step = 1;
  /// Keep only each layer's input in the forward and compute the layers again in the backward.
  bool activation_checkpointing = false;
  /// With it: how many layers, from the first, are computed again (the rest keep their
  /// activations); 0 = every layer.
  int64_t checkpoint_layers = 0;
  /// LoRA (the model carries adapters, decoder::set_adapters): the base model's folder, which
  /// checkpoints record beside the base's content hash.
  std::string base_model;
  /// Data parallelism (data_parallel.hpp): this trainer is one rank of `group` (not owned; null:
  /// the only rank), and the gradient is summed over the ranks in buckets of this many bytes.
  dist::collectives* group = nullptr;
  int64_t grad_bucket_bytes = 64 << 20;
  /// ZeRO-1 with a group of several ranks: this rank keeps only its slice (rl::shard_of) of the
  /// fp32 master weights and AdamW moments; the gradient is reduce-scattered and the updated
  /// weights all-gathered. Checkpoints hold one file pair per rank and resume with the same ranks.
  bool shard_optimizer = false;
};

/// One sequence of a batch: the prompt, the trained tokens (a sampled output, or an SFT target),
/// and what earlier stages attached to it.
struct train_sequence {
  std::vector<int64_t> prompt, output;
  std::vector<float> rollout_logprobs;  ///< per output token (RL)
  std::vector<uint64_t> versions;       ///< per output token, the version it was sampled under
  std::vector<float> ref_logprobs;      ///< per output token, when a reference model ran
  std::vector<float> teacher_logprobs;  ///< per output token, when a teacher ran (distillation)
  std::vector<float> values;            ///< per output token, when a critic ran (GAE)
  std::vector<int64_t> experts;         ///< MoE: the rollout's routing (see sample_msg)
  /// Per output token: 1 trained on, 0 context (an environment's tokens in a multi-turn
  /// trajectory: a tool's or user's message). Empty: every output token is trained on.
  std::vector<uint8_t> mask;
  float reward = 0;
  int64_t group = 0;  ///< samples of one prompt share a group
};

struct batch_layout;
struct update_totals;

/// FLOPs of one optimizer step over `batch`, as the project counts MFU: 6 N T + 6 L d_attn
/// sum(T_i^2) (N all parameters, T tokens, L layers, d_attn = heads x head_dim, T_i each sequence's
/// length), against 989 TFLOP/s (H100/H200 dense bf16).
double train_step_flops(const std::vector<train_sequence>& batch, const llm::decoder& model);

/// The content hash of a LoRA run's base model (an xxh3 over its tensors' hashes, 16 hex
/// digits): a checkpoint of adapters records it, and resumes only against the same base.
std::string lora_base_hash(const llm::flat_params& base);

class policy_trainer {
 public:
  /// Takes options.estimator and options.policy_loss from `losses` (an unknown name throws
  /// std::invalid_argument listing the known ones).
  policy_trainer(std::unique_ptr<llm::decoder> model, trainer_options options,
                 const rl::registries& losses);
  /// With the built-in losses and estimators.
  policy_trainer(std::unique_ptr<llm::decoder> model, trainer_options options);

  /// One training step (updates_per_step optimizer steps) on `batch`. Metrics: the loss terms,
  /// pg_clipfrac, ppo_kl, entropy, grad_norm, lr, train_tokens_per_s, train/rollout log-prob
  /// difference, TIS/MIS statistics, skipped_steps. Throws when the weights become non-finite.
  /// `lists`, when given, gets per-value lists for the metric sinks' histograms: `advantage` (one
  /// per response token of an RL batch) and `response_length` (one per sequence).
  std::map<std::string, double> train(const std::vector<train_sequence>& batch,
                                      std::map<std::string, std::vector<double>>* lists = nullptr);

  llm::decoder& model() { return *model_; }
  const trainer_options& options() const { return options_; }
  /// The weight version the model holds now (the last one published). Set, the next step's
  /// metrics add train_rollout_logprob_abs_diff_max_held: the largest train/rollout log-prob
  /// difference over the sequences whose every token was sampled under that version (absent when
  /// there is none), the difference that is 0 when the engine and the trainer agree.
  void set_held_version(uint64_t version) { held_version_ = version; }
  uint64_t optimizer_steps() const { return adam_->steps(); }
  /// The fp32 master weights the optimizer steps (the model's own buffer for fp32 models) and the
  /// optimizer, for benches that time the optimizer step on the trainer's own tensors.
  at::Tensor& master_weights() { return master_; }
  rl::adamw& optimizer() { return *adam_; }

  /// Writes the model (HF folder: config.json + safetensors) to dir/model, the optimizer state to
  /// dir/optimizer.bin and, for bf16 models, the fp32 master weights to dir/master.bin; load()
  /// reads them back (bitwise). With LoRA only the adapters are saved (their fp32 master weights
  /// in dir/master.bin) and dir/lora.json records the settings and the base by folder and content
  /// hash: load() refuses a checkpoint of another base or other settings, naming both.
  void save(const std::filesystem::path& dir) const;
  void load(const std::filesystem::path& dir);
  /// LoRA: the base's content hash (xxh3 over its tensors' hashes, hex); empty without LoRA.
  const std::string& base_hash() const { return base_hash_; }

 private:
  /// Token advantages of an RL batch (reward_mean, advantage_abs_mean into `metrics`).
  at::Tensor advantages(const std::vector<train_sequence>& batch, const batch_layout& layout,
                        std::map<std::string, double>& metrics) const;
  /// The old policy's log-probs [N]: the rollout's, or a no-grad forward before several updates;
  /// undefined: each micro-batch's own first forward.
  at::Tensor old_logprobs(const std::vector<train_sequence>& batch,
                          const batch_layout& layout) const;
  /// updates_per_step optimizer steps, each over all micro-batches.
  update_totals update(const std::vector<train_sequence>& batch, const batch_layout& layout,
                       const at::Tensor& advantages, const at::Tensor& old_logprobs);
  /// Forward and backward of one micro-batch; false when its loss is not finite.
  bool backward_micro_batch(const std::vector<train_sequence>& batch, const batch_layout& layout,
                            const at::Tensor& advantages, const at::Tensor& old_logprobs,
                            const std::vector<size_t>& mb, bool first, update_totals& totals);
  /// The loss of one micro-batch from its scores; its metrics go to `totals`.
  at::Tensor micro_batch_loss(const batch_layout& layout, const at::Tensor& advantages,
                              const at::Tensor& old_logprobs, const std::vector<size_t>& mb,
                              const llm::token_scores& scores, update_totals& totals) const;
  /// AdamW on the accumulated gradient (a skipped step when `finite` is false or the optimizer
  /// skips it), then the model's weights from the master weights.
  void optimizer_step(bool finite, update_totals& totals);
  /// ZeRO-1's step: this rank's slice of AdamW on the reduce-scattered gradient (clipped by the
  /// whole gradient's norm), then every rank's slice all-gathered into the model's weights.
  void sharded_step(update_totals& totals);

  std::unique_ptr<llm::decoder> model_;
  trainer_options options_;
  std::unique_ptr<rl::advantage_estimator> estimator_;
  std::unique_ptr<rl::policy_loss> loss_;
  /// LoRA: the reference log-probs of a batch whose samples carry none: the base's (the
  /// adapters off), per micro-batch, no second copy of the base.
  at::Tensor base_logprobs(const std::vector<train_sequence>& batch,
                           const batch_layout& layout) const;
  void save_lora(const std::filesystem::path& dir) const;
  void load_lora(const std::filesystem::path& dir);

  at::Tensor master_;  ///< fp32 master weights (the buffer itself when the model is fp32)
  /// ZeRO-1: whether master_ and the optimizer hold only this rank's slice, which slice, and
  /// this step's reduce-scattered gradient of it.
  bool sharded_ = false;
  rl::shard_range shard_;
  at::Tensor grad_slice_;
  std::unique_ptr<rl::adamw> adam_;
  std::string base_hash_;
  std::optional<uint64_t> held_version_;
};

}  // namespace milesrt::trainer
