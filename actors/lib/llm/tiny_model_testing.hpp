#pragma once
// Shared by the unit tests that need a model but not a particular one (trainer, critic, reference,
// publisher, weights): one tiny Qwen3 config, its MoE variant, and a random fp32 CPU model of it.
// It lives beside the model (not under test/) because tests under actors/ include only
// runtime/, kernels/, schemas and actors/lib/ (test/house.test.cpp).
#include <ATen/ATen.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "actors/lib/llm/model.hpp"

namespace milesrt::llm::testing {

/// A tiny Qwen3 (sizes multiples of 16: the packed and single-sequence paths agree bitwise).
inline const std::string kTinyQwen3 =
    R"({"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"],
  "vocab_size": 32, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
  "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16, "rms_norm_eps": 1e-6,
  "hidden_act": "silu", "max_position_embeddings": 128, "rope_theta": 10000.0,
  "tie_word_embeddings": true})";

/// The same sizes as a Qwen3-MoE: 4 experts, 2 per token, on every layer.
inline const std::string kTinyQwen3Moe =
    R"({"model_type": "qwen3_moe", "vocab_size": 32, "hidden_size": 32,
  "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
  "num_key_value_heads": 1, "head_dim": 16, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
  "tie_word_embeddings": true, "hidden_act": "silu", "num_experts": 4, "num_experts_per_tok": 2,
  "moe_intermediate_size": 32, "decoder_sparse_step": 1, "norm_topk_prob": true})";

/// A model of `config` with random weights from `seed`, fp32 on the CPU.
inline std::unique_ptr<decoder> tiny_model(uint64_t seed, const std::string& config = kTinyQwen3) {
  return decoder::random(config, at::kFloat, at::kCPU, seed);
}

/// A folder holding tiny_model(1) (config.json, model.safetensors), made once per test process
/// and removed at its exit: for checks of params that validation compares with a model folder.
inline const std::string& tiny_model_folder() {
  struct folder {
    std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                ("milesrt-tiny-model-" + std::to_string(::getpid()));
    folder() { tiny_model(1)->save(dir); }
    ~folder() { std::filesystem::remove_all(dir); }
  };
  static const folder f;
  static const std::string path = f.dir.string();
  return path;
}

}  // namespace milesrt::llm::testing
