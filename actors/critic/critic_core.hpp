#pragma once
/// The PPO critic without the actor around it: a decoder plus a value head Linear(hidden, 1), the
/// values it gives the output tokens of samples, one optimizer step of the clipped value loss
/// towards GAE returns, and checkpoints. The critic kind (critic_kind.cpp) wraps it.
///
/// Parameters for the optimizer live in ONE flat fp32 master tensor [decoder params | head
/// weight (hidden) | head bias (1)]; AdamW and its global-norm clip see decoder and head together.
/// After each step the decoder's own flat buffer (fp32: a bitwise copy; bf16: rounded) and the
/// head (an fp32 leaf of hidden+1 values) are refreshed from it.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/lib/llm/messages.hpp"
#include "actors/lib/llm/model.hpp"
#include "actors/lib/rl/optimizer.hpp"

namespace milesrt::critic {

struct critic_options {
  rl::adamw_options optimizer;
  double value_clip = 0.2;  ///< 0: unclipped
  double gamma = 1.0, lambda = 1.0;
};

/// The value head's file inside a model folder: tensors value_head.weight [1, hidden] and
/// value_head.bias [1].
constexpr const char* value_head_file = "value_head.safetensors";

class critic_core {
 public:
  /// `head`: [hidden + 1] (weight then bias), any float dtype; undefined = zeros.
  critic_core(std::unique_ptr<llm::decoder> model, at::Tensor head, critic_options options);
  /// A critic from a model folder: the decoder, and the value head from value_head.safetensors
  /// there when present (else zeros). Throws naming the file and tensor.
  static std::unique_ptr<critic_core> load(const std::filesystem::path& dir, at::ScalarType dtype,
                                           at::Device device, critic_options options);

  /// For each sample, one value per output token: the head applied to the final hidden state at
  /// the position that predicts that token (P-1 .. P+O-2). One packed forward, no grad.
  std::vector<std::vector<float>> values(const std::vector<llm::sample_msg>& samples) const;

  /// One optimizer step on `samples`: returns from GAE over each sample's reward at its last token
  /// and the values it carries (computed now where it carries none), the clipped value loss
  /// (token mean over the step), one forward + backward per `group_sizes` entry (consecutive
  /// samples). Metrics: critic_loss, critic_grad_norm, critic_value_mean (of the values before
  /// the step), critic_return_mean, critic_lr, critic_skipped_steps, critic_train_seconds.
  std::map<std::string, double> train(const std::vector<llm::sample_msg>& samples,
                                      const std::vector<size_t>& group_sizes);

  uint64_t optimizer_steps() const { return adam_->steps(); }
  const llm::decoder& model() const { return *model_; }
  /// [hidden + 1] fp32: weight, then bias.
  at::Tensor head() const;

  /// Writes dir/model (config.json + safetensors + value_head.safetensors: a folder load() takes),
  /// dir/optimizer.bin and, for bf16 decoders, dir/master.bin (the fp32 master weights);
  /// restore() reads them back bitwise.
  void save(const std::filesystem::path& dir) const;
  void restore(const std::filesystem::path& dir);

 private:
  /// Values of the output tokens of samples[idx...] (packed, in order), with grad when enabled.
  at::Tensor predict(const std::vector<llm::sample_msg>& samples, size_t begin, size_t end) const;
  /// A step's samples as the GAE estimator takes them: per sample its reward and group, per
  /// output token its old value (carried, or computed now) and its sample's index.
  struct step_inputs {
    std::vector<float> rewards, old_values;
    std::vector<int64_t> groups, seq_index;
  };
  step_inputs gather(const std::vector<llm::sample_msg>& samples,
                     const std::vector<size_t>& group_sizes) const;
  /// One forward + backward of the clipped value loss per group (over tokens `old_t`, `returns`
  /// and `mask_t` of the whole step, the loss divided by their count); returns the summed loss.
  double backward_groups(const std::vector<llm::sample_msg>& samples,
                         const std::vector<size_t>& group_sizes, const at::Tensor& old_t,
                         const at::Tensor& returns, const at::Tensor& mask_t);
  /// AdamW over the decoder's and the head's gradients (then zeroed); publishes the master
  /// weights unless the step was skipped.
  rl::adamw::step_info optimizer_step();
  /// Copies the master weights into the decoder's buffer and the head.
  void publish_master();

  std::unique_ptr<llm::decoder> model_;
  critic_options options_;
  at::Tensor head_;    ///< [hidden + 1] fp32 leaf, requires grad
  at::Tensor master_;  ///< [decoder params + hidden + 1] fp32
  int64_t decoder_numel_ = 0;
  std::unique_ptr<rl::adamw> adam_;
};

}  // namespace milesrt::critic
