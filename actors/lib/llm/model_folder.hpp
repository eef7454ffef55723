#pragma once
/// A Hugging Face model folder, checked as far as it can be without reading the weights' values:
/// validation calls this before any actor starts, so a missing or corrupt folder ends a run with
/// exit 2 naming the file instead of failing an actor once the graph runs.

#include <filesystem>
#include <string>

#include "actors/lib/llm/config.hpp"

namespace milesrt::llm {

class safetensors_checkpoint;

/// Throws safetensors_error naming the file and the tensor when `ckpt` lacks a tensor that config
/// `c` needs or holds it in another shape.
void check_weights(const safetensors_checkpoint& ckpt, const model_config& c);

/// What is wrong with the model folder `dir` ("" when nothing): not a folder, a config.json that
/// does not parse or breaks the limits, safetensors files whose headers are corrupt or cut short,
/// a tensor the config needs missing or of another shape. On success `*config` (when given) holds
/// the parsed config.
std::string model_folder_problem(const std::filesystem::path& dir, model_config* config = nullptr);

/// Writes `text` to `file` (replacing it); throws std::runtime_error "cannot write FILE: <reason>"
/// when the write fails (a full disk, a file-size limit, a read-only folder).
void write_text_file(const std::filesystem::path& file, const std::string& text);

}  // namespace milesrt::llm
