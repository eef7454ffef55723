#pragma once
/// The LoRA adapter a decoder applies, as llama.cpp's models apply their adapters: the A and B
/// matrices of every targeted projection in one flat buffer (lora.hpp's layout and names), the
/// settings they were made with (rank, alpha and the scaling, the target modules and parameters),
/// and, while it is served merged, the copy of the base the merge starts from. A decoder holds at
/// most one (decoder::set_adapters) and applies it in every forward, or merged into its parameters
/// (decoder::serve_merged).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/lib/llm/config.hpp"
#include "actors/lib/llm/flat_params.hpp"
#include "actors/lib/llm/lora.hpp"

namespace milesrt::llm {

class lora_adapter {
 public:
  /// `weights` made with `config` for a model of `m` in `dtype` on `device`: they must have exactly
  /// the names and shapes of lora_parameter_specs(m, config). Throws std::invalid_argument naming
  /// what differs (config_error when `config` does not fit `m`).
  lora_adapter(std::shared_ptr<flat_params> weights, lora_config config, const model_config& m,
               at::ScalarType dtype, at::Device device);

  const lora_config& config() const { return config_; }
  /// alpha / rank, or alpha / sqrt(rank) with rsLoRA.
  double scaling() const { return config_.scale(); }
  /// The short names of the projections it adapts (q_proj, ..., down_proj).
  const std::vector<std::string>& target_modules() const { return config_.target_modules; }
  /// The A and B matrices: what a LoRA trainer trains and a publisher moves.
  const std::shared_ptr<flat_params>& weights() const { return weights_; }

  /// What one forward applies: these matrices, with the adapters' dropout when `dropout` (its
  /// masks drawn from `dropout_seed`).
  lora_view view(bool dropout, uint64_t dropout_seed) const {
    return lora_view{weights_.get(), &config_, dropout, dropout_seed};
  }

  /// While served merged, the copy of the base the merge starts from (null: the forward applies
  /// the matrices).
  const std::shared_ptr<const flat_params>& merge_base() const { return merge_base_; }
  bool merged() const { return merge_base_ != nullptr; }
  void set_merge_base(std::shared_ptr<const flat_params> base) { merge_base_ = std::move(base); }
  /// The merge base with the current matrices merged into it (merge_adapters); needs merged().
  std::shared_ptr<flat_params> merge(const model_config& m) const;

 private:
  std::shared_ptr<flat_params> weights_;
  lora_config config_;
  std::shared_ptr<const flat_params> merge_base_;
};

}  // namespace milesrt::llm
