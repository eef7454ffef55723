#pragma once
/// LoRA adapters in peft's folder format (PyPI `peft`, the format transformers, vLLM and SGLang
/// load): adapter_config.json (LoraConfig's fields) and adapter_model.safetensors, with the tensor
/// names peft saves (`base_model.model.model.layers.{i}.self_attn.q_proj.lora_A.weight`, lora.hpp).
/// milesrt writes such a folder as a LoRA run's export and starts a LoRA run from one. What milesrt
/// does not implement (DoRA, modules_to_save, biases, per-layer ranks or layers, regex targets,
/// expert parameters) is refused naming the field, never ignored.

#include <ATen/core/Tensor.h>

#include <filesystem>
#include <memory>
#include <string>

#include "actors/lib/llm/config.hpp"
#include "actors/lib/llm/flat_params.hpp"
#include "actors/lib/llm/lora.hpp"

namespace milesrt::llm {

/// A peft adapter read from its folder.
struct peft_adapter {
  lora_config config;
  std::shared_ptr<flat_params> weights;  ///< named and ordered as lora_parameter_specs
  std::string base_model;                ///< adapter_config.json's base_model_name_or_path
};

/// Writes dir/adapter_config.json and dir/adapter_model.safetensors (fp32, as peft saves an fp32
/// model's adapter) for `adapters` of base model `m` (its folder or hub name: `base_model`).
/// Throws naming the file and the reason when a write fails.
void save_peft_adapter(const std::filesystem::path& dir, const model_config& m,
                       const lora_config& c, const flat_params& adapters,
                       const std::string& base_model);

/// Reads dir/adapter_config.json; throws config_error naming the file and the field for anything
/// milesrt cannot apply exactly. `base_model` (when given) gets base_model_name_or_path.
lora_config read_peft_config(const std::filesystem::path& dir, std::string* base_model = nullptr);

/// Reads a peft LoRA folder for base model `m` (`base_dir`: the base model's folder, compared with
/// the adapter's base_model_name_or_path where that names a folder), converting to `dtype` on
/// `device`. Throws config_error / safetensors_error naming the file and the field or tensor: an
/// adapter made for another base (a tensor of another shape, a base folder whose config differs),
/// a missing or unexpected tensor.
peft_adapter load_peft_adapter(const std::filesystem::path& dir, const model_config& m,
                               const std::filesystem::path& base_dir, at::ScalarType dtype,
                               at::Device device);

}  // namespace milesrt::llm
