#pragma once
/// The graph file's `lora` section (schemas/lora.capnp, on the trainer and rollout kinds) as the
/// model's lora_config, and its validation.

#include <optional>
#include <string>
#include <vector>

#include "actors/lib/llm/lora.hpp"
#include "milesrt/lora.capnp.h"
#include "runtime/core/problem.hpp"

namespace milesrt::llm {

/// The settings of a `lora` section.
lora_config to_lora_config(schema::Lora::Reader r);

class decoder;

/// What a trainer and the engines it publishes to must agree on, as one line ("none" without a
/// section): rank, alpha, rsLoRA, the targets and where the first adapters come from (seed or
/// adapter folder). Dropout (the trainer's) and merge (an engine's) may differ. The trainer and
/// rollout kinds state it as their graph setting "lora", so validation refuses a graph whose
/// engines would serve other adapters than the trainer trains.
std::string lora_agreement(bool has_section, schema::Lora::Reader r);

/// Attaches the section's initial adapters to `model` (unmerged): read from its `adapter` folder
/// (peft's format, peft_io.hpp) when set, else initialised from its `seed` as peft does. The
/// trainer and its engines call this with the same section, so the engine's first version is the
/// trainer's.
void attach_initial_adapters(decoder& model, schema::Lora::Reader r, const std::string& model_dir);

/// What is wrong with a `lora` section, each problem's field "lora.<field>"; `model_dir`, when it
/// is a readable model folder, is checked too (the experts of MoE models are refused), and so is
/// the `adapter` folder: readable by peft_io, for this base, with the section's settings.
problem_list lora_params_problems(schema::Lora::Reader r, const std::string& model_dir);

}  // namespace milesrt::llm
