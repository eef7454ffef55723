#pragma once
/// LoRA adapters of a decoder (docs/lora.md): for each targeted projection y = x W^T (+ b), the
/// adapted one is y = x W^T (+ b) + scale * ((dropout(x) A^T) B^T), with A [r, in] and B [out, r]
/// trained and W frozen. The adapters of a model live in one flat_params of their own, named as
/// peft saves them (`base_model.model.model.layers.{i}.self_attn.q_proj.lora_A.weight`), so that
/// training steps, checkpoints and publishes only that buffer, and its device address stays put
/// (CUDA graphs replay across updates). The adapter matmuls go through row_ops::linear_rows, the
/// row-invariant path, so the training and the serving forward stay bitwise equal on the CPU.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actors/lib/llm/config.hpp"
#include "actors/lib/llm/flat_params.hpp"
#include "runtime/core/problem.hpp"

namespace milesrt::llm {

/// The LoRA settings (peft's LoraConfig: r, lora_alpha, lora_dropout, use_rslora,
/// target_modules).
struct lora_config {
  int64_t rank = 8;
  double alpha = 16;
  double dropout = 0;  ///< on the adapters' input, in the gradient forward only
  bool use_rslora = false;
  /// Short module names: q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj.
  std::vector<std::string> target_modules;
  /// The fused expert tensors of MoE layers, as peft's target_parameters names them:
  /// mlp.experts.gate_up_proj ([E, 2I, H]), mlp.experts.down_proj ([E, H, I]). Each gets one A
  /// [r * E, in] and one B [out, r * E]; expert e's delta is scale * B_e A_e with A_e = A's rows
  /// e*r .. e*r+r-1 and B_e = B's columns j*E + e (j < r), as peft's ParamWrapper reshapes them.
  std::vector<std::string> target_parameters;
  /// alpha / rank, or alpha / sqrt(rank) with use_rslora (peft's scaling).
  double scale() const;
};

/// Bounds of the LoRA settings (docs/limits.md, "LoRA").
struct lora_limits {
  static constexpr int64_t max_rank = 4096;
};

/// The module names LoRA may target, in forward order.
const std::vector<std::string>& lora_module_names();

/// The expert parameters LoRA may target (target_parameters), in forward order.
const std::vector<std::string>& lora_parameter_names();

/// What is wrong with `c` for model `m`, each problem naming the field it has in the graph file
/// (`rank`, `alpha`, `dropout`, `targetModules`, `targetParameters`); empty when nothing is. `m`
/// may be null (the model is not read yet): then only what needs no model is checked.
problem_list lora_config_problems(const lora_config& c, const model_config* m);

/// The adapters' names and shapes in buffer order (layer by layer, modules in forward order, A
/// then B), named as peft saves them. Throws config_error naming the problem (lora_config_problems)
/// when `c` does not fit `m`.
std::vector<std::pair<std::string, std::vector<int64_t>>> lora_parameter_specs(
    const model_config& m, const lora_config& c);

/// peft's name of one adapter matrix: `base_model.model.model.layers.{layer}.{module_path}.lora_A
/// .weight` (`which` 'A' or 'B'); module_path is e.g. `self_attn.q_proj`, `mlp.down_proj`.
std::string lora_tensor_name(int64_t layer, const std::string& module_path, char which);

/// peft's name of one expert adapter matrix of `parameter` (`mlp.experts.gate_up_proj` or
/// `mlp.experts.down_proj`): peft nests one wrapper per parameter, so with both targeted
/// gate_up_proj's is `...layers.{layer}.mlp.experts.base_layer.lora_A.weight` and down_proj's
/// `...mlp.experts.lora_A.weight`; with one alone, `...mlp.experts.lora_A.weight`.
std::string lora_expert_tensor_name(int64_t layer, const std::string& parameter,
                                    const lora_config& c, char which);

/// The path of a short module name inside a layer: q_proj -> self_attn.q_proj, up_proj ->
/// mlp.up_proj.
std::string lora_module_path(const std::string& module);

/// New adapters initialised as peft does: every A kaiming-uniform with a = sqrt(5) (U(-1/sqrt(in),
/// 1/sqrt(in))) from a generator seeded with `seed`, every B zero (so the adapted model starts as
/// the base, bit for bit).
std::shared_ptr<flat_params> make_adapters(const model_config& m, const lora_config& c,
                                           at::ScalarType dtype, at::Device device, uint64_t seed);

/// A copy of `base` with the adapters merged into it: W + scale * B A for every targeted
/// projection (computed in fp32, stored in base's dtype). The option of serving a merged model;
/// its log-probs differ from the unmerged forward's by rounding (docs/lora.md).
std::shared_ptr<flat_params> merge_adapters(const flat_params& base, const model_config& m,
                                            const lora_config& c, const flat_params& adapters);

/// The adapters of one forward, as the decoder's layers look them up.
struct lora_view {
  const flat_params* adapters = nullptr;  ///< null: no adapters (or adapters off)
  const lora_config* config = nullptr;
  bool dropout = false;       ///< apply config->dropout (the gradient forward)
  uint64_t dropout_seed = 0;  ///< the masks' seed: the same seed gives the same masks
  explicit operator bool() const { return adapters != nullptr; }
};

/// The adapter term scale * ((dropout(x) A^T) B^T) of `module_path` in `layer` for x [rows, in],
/// through row_ops::linear_rows; undefined when the module is not targeted. The dropout mask of a
/// (seed, layer, module) is the same on every call (a layer computed again for activation
/// checkpointing draws the same mask).
at::Tensor lora_delta(const lora_view& v, int64_t layer, const std::string& module_path,
                      const at::Tensor& x);

/// The adapter term of expert `expert` of `parameter` (`mlp.experts.gate_up_proj`: [rows, 2I],
/// gate then up; `mlp.experts.down_proj`: [rows, H]) in `layer` for x [rows, in], through
/// row_ops::linear_rows; undefined when the parameter is not targeted. No dropout (peft has none
/// for parameters; validation refuses it).
at::Tensor lora_expert_delta(const lora_view& v, int64_t layer, const std::string& parameter,
                             int64_t expert, const at::Tensor& x);

}  // namespace milesrt::llm
