#pragma once
/// Decoder model configuration read from a Hugging Face config.json.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace milesrt::llm {

/// An unknown architecture or an unsupported value; the message names the file and the field.
class config_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class family { qwen3, qwen2, llama, qwen3_moe };
const char* to_string(family f);

/// Llama-3 rope scaling ("rope_type": "llama3").
struct llama3_rope {
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct model_config {
  family arch = family::qwen3;
  std::string architecture;  ///< as in config.json, e.g. Qwen3ForCausalLM
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  std::optional<llama3_rope> rope_llama3;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  ///< q/k/v biases (Qwen2: always)
  bool qk_norm = false;         ///< RMSNorm of q and k per head (Qwen3)
  // Mixture of experts (Qwen3-MoE).
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = false;
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
  double router_aux_loss_coef = 0.0;

  /// Whether layer `i` has a mixture-of-experts MLP.
  bool is_moe_layer(int64_t i) const;
  int64_t num_moe_layers() const;
};

/// Bounds of config.json's sizes (docs/limits.md, "Model folders"): beyond them a model could not
/// be held in memory, and products of them would overflow.
struct config_limits {
  static constexpr int64_t max_layers = 1024;
  static constexpr int64_t max_hidden_size = 1 << 17;          ///< also intermediate sizes
  static constexpr int64_t max_intermediate_size = 1 << 20;    ///< dense and expert MLPs
  static constexpr int64_t max_heads = 1024;                   ///< attention and KV heads
  static constexpr int64_t max_head_dim = 1024;                ///<
  static constexpr int64_t max_vocab_size = int64_t{1} << 24;  ///< 16.7M tokens
  static constexpr int64_t max_experts = 4096;                 ///<
};

/// Bytes of `blocks` KV-cache blocks of `block_size` tokens with elements of `element_size`
/// bytes (a double: the product of unchecked counts may not fit an integer).
double kv_cache_bytes(const model_config& c, double blocks, double block_size, double element_size);

/// The machine's physical memory in bytes (0 if unknown).
double physical_memory_bytes();

/// Reads DIR/config.json (or the given file). Throws config_error naming the field.
model_config load_config(const std::filesystem::path& path);

/// Parses config.json text; `origin` names it in errors.
model_config parse_config(const std::string& json_text, const std::string& origin);

}  // namespace milesrt::llm
