#pragma once
/// For the session tests: a random one-layer Qwen3 over the 33.5k-token tokenizer the build
/// trains (with the Qwen3 chat template), saved with that tokenizer.

#include <ATen/ATen.h>

#include <filesystem>

#include "actors/lib/llm/model.hpp"

namespace milesrt::testing {

/// dir/model, made; its path.
inline std::filesystem::path session_model_folder(const std::filesystem::path& dir) {
  auto model_dir = dir / "model";
  auto model = milesrt::llm::decoder::random(R"({"model_type": "qwen3", "vocab_size": 33520,
    "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 1, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
    "tie_word_embeddings": true, "hidden_act": "silu"})",
                                             at::kFloat, at::kCPU, 9);
  model->save(model_dir);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    std::filesystem::copy_file(std::filesystem::path(MILESRT_TOKENIZER_DATA) / "qwen3" / f,
                               model_dir / f);
  return model_dir;
}

}  // namespace milesrt::testing
