#pragma once
/// The graph file's `lora` section (schemas/lora.capnp, on the trainer and rollout kinds) as the
/// model's lora_config, and its validation.

#include <optional>
#include <string>
#include <vector>

#include "actors/lib/llm/lora.hpp"
#include "milesrt/lora.capnp.h"

namespace milesrt::llm {

/// The settings of a `lora` section.
lora_config to_lora_config(schema::Lora::Reader r);

/// What is wrong with a `lora` section, each line starting "lora.<field>: "; `model_dir`, when it
/// is a readable model folder, is checked too (the experts of MoE models are refused).
std::vector<std::string> lora_params_problems(schema::Lora::Reader r, const std::string& model_dir);

}  // namespace milesrt::llm
