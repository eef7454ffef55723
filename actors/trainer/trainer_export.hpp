#pragma once
/// What the trainer writes besides its checkpoint files: the model exported as a Hugging Face
/// folder, and the actor's small state in a checkpoint.

#include <cstdint>
#include <filesystem>
#include <vector>

#include "actors/trainer/trainer_state.hpp"

namespace milesrt::trainer {

/// Writes the model as a complete Hugging Face folder: weights and config, and the tokenizer
/// files of the folder training started from. With LoRA the weights are the base with the
/// adapters merged in (a model any reader loads).
void export_model(const trainer_state& st, const std::filesystem::path& dir);

/// The actor's small state for checkpoints (the model and optimizer go to files).
std::vector<uint8_t> encode_state(const trainer_state& st);
/// Reads encode_state's bytes into `st`; false when they are not its format.
bool decode_state(trainer_state& st, const std::vector<uint8_t>& bytes);

}  // namespace milesrt::trainer
