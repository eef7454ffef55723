#pragma once
/// Hugging Face-compatible decoder models (Qwen3, Qwen2/2.5, Llama-3, Qwen3-MoE) in libtorch, with
/// one forward that serves both paths:
///   (a) training: packed variable-length sequences in one pass (no padding), then log-probs and
///       entropy computed in vocabulary chunks so that [tokens x vocab] logits never exist at once;
///   (b) serving: prefill and decode against a paged KV cache.
/// For the same tokens both paths give bitwise-equal log-probs in fp32 on the CPU, because every
/// operation whose reduction order could depend on the batch is made batch-invariant:
///   - row-invariant GEMM: every CPU matrix product runs in calls of exactly 16 rows (the last one
///     padded): MKL's sgemm switches kernels with the row count (8 rows, and thousands, take
///     others), so only a fixed call shape gives each row the same result whatever else is in
///     the batch (checked by a test);
///   - per-position attention: each query position attends with the same calls on the same shapes
///     (its kv group's queries padded to 8 rows, against keys and values 0..p) in both paths;
///   - per-row norms, softmax and log-softmax, and MoE expert sums in a fixed order (by top-k
///   slot).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/lib/llm/config.hpp"
#include "actors/lib/llm/flat_params.hpp"
#include "actors/lib/llm/kv_cache.hpp"
#include "actors/lib/llm/lora.hpp"
#include "actors/lib/llm/lora_adapter.hpp"

namespace milesrt::llm {

/// One sequence's part of a forward: `ids` are new tokens at positions start, start+1, ...
/// Without a block table the sequence has no cache (start must be 0: the training path); with one,
/// positions before `start` are read from the cache and the new tokens' K/V are written to it.
struct segment {
  std::vector<int64_t> ids;
  int64_t start = 0;
  const std::vector<int32_t>* block_table = nullptr;
};

struct forward_options {
  kv_cache* cache = nullptr;
  /// Routing replay: per MoE layer, [tokens, top_k] int64 experts to use instead of the router's.
  const std::vector<at::Tensor>* replay_experts = nullptr;
  /// Activation checkpointing (training path only): when set, forward keeps only each layer's
  /// input, calls this with the final hidden states [tokens, hidden] (autograd on) for a scalar
  /// loss, and back-propagates it through every layer computed again; the parameters' gradients
  /// are then accumulated and the returned hidden states are detached.
  std::function<at::Tensor(const at::Tensor& hidden)> checkpoint_head = nullptr;
  /// With checkpoint_head: how many layers, from the first, are computed again in the backward
  /// (the later ones keep their activations, as autograd does); 0 = all of them.
  int64_t checkpoint_layers = 0;
  /// A prepared step (the cache must have paged kernels): `segments` are then ignored.
  const paged_step* step = nullptr;
  /// LoRA: the base alone, the adapters left out (the reference model is the base).
  bool adapters_off = false;
  /// LoRA: apply the adapters' dropout (the trainer's gradient forwards only), its masks drawn
  /// from this seed (the same seed, the same masks: exact resume, recomputed layers).
  bool lora_dropout = false;
  uint64_t lora_dropout_seed = 0;
};

struct forward_result {
  at::Tensor hidden;                     ///< [tokens, hidden]: final-norm hidden states, packed
  std::vector<at::Tensor> experts;       ///< per MoE layer [tokens, top_k] (int64)
  std::vector<at::Tensor> router_probs;  ///< per MoE layer [tokens, num_experts]
};

/// The Switch-Transformer load-balance loss of one forward of a model of `num_experts` experts, and
/// each expert's share of tokens.
std::pair<at::Tensor, at::Tensor> load_balance(const forward_result& r, int64_t num_experts);

struct token_scores {
  at::Tensor logprobs;  ///< [n]
  at::Tensor entropy;   ///< [n]
};

class decoder {
 public:
  /// Loads config.json and the safetensors weights of a Hugging Face model folder, converting to
  /// `dtype` on `device`. Throws config_error / safetensors_error naming the file and tensor.
  static std::unique_ptr<decoder> load(const std::filesystem::path& dir, at::ScalarType dtype,
                                       at::Device device);
  /// The model of `dir`'s config.json on `params` (another decoder's of that folder, shared, not
  /// copied; their dtype and device). Throws config_error, or std::invalid_argument when the
  /// parameters are not the config's.
  static std::unique_ptr<decoder> with_params(const std::filesystem::path& dir,
                                              std::shared_ptr<flat_params> params);
  /// A model with random weights (norms near 1, the rest N(0, 0.02)), for benchmarks and tests.
  static std::unique_ptr<decoder> random(const std::string& config_json, at::ScalarType dtype,
                                         at::Device device, uint64_t seed);
  /// Saves config.json and model.safetensors (sharded with an index past `max_shard_bytes`) so
  /// that transformers loads them; `weights`, when given, instead of the model's own parameters
  /// (the same names and shapes: a LoRA model's merged copy).
  void save(const std::filesystem::path& dir, uint64_t max_shard_bytes = 5ull << 30,
            const flat_params* weights = nullptr) const;

  const model_config& config() const { return config_; }
  const flat_params& params() const { return *params_; }
  flat_params& mutable_params() { return *params_; }
  /// The parameters as a shared object: a colocated engine may use the trainer's own.
  std::shared_ptr<flat_params> shared_params() const { return params_; }
  /// Uses `p` (same names and shapes, any buffer) as this model's parameters from now on.
  void set_params(std::shared_ptr<flat_params> p);
  /// Attaches LoRA adapters (lora_adapter.hpp): `adapters` has exactly the names and shapes of
  /// lora_parameter_specs(config(), c), this model's dtype and device. Every forward then applies
  /// them, unless forward_options::adapters_off. Throws std::invalid_argument naming what differs.
  void set_adapters(std::shared_ptr<flat_params> adapters, lora_config c);
  /// Detaches them: the model is its base again.
  void clear_adapters();
  /// The adapter this model applies, or null.
  const lora_adapter* adapter() const { return adapter_.get(); }
  /// The attached adapters' matrices and settings (adapter()'s), or null without adapters.
  std::shared_ptr<flat_params> adapters() const { return adapter_ ? adapter_->weights() : nullptr; }
  const lora_config* lora() const { return adapter_ ? &adapter_->config() : nullptr; }
  /// Serves the adapters merged (the rollout's lora.merge): from now on the parameters hold
  /// W + scale B A, made from `base` (a copy of the base kept for it) by refresh_merged() after
  /// each update of the adapters, and the forward leaves the adapters out.
  void serve_merged(std::shared_ptr<const flat_params> base);
  /// Writes the merge of the base and the current adapters into the parameters (in place: their
  /// address stays).
  void refresh_merged();

  /// The weights a trainer trains and a publisher moves: the adapters when attached (LoRA), else
  /// the parameters. The weight transports read and replace these.
  const flat_params& published() const { return adapter_ ? *adapter_->weights() : *params_; }
  flat_params& mutable_published() { return adapter_ ? *adapter_->weights() : *params_; }
  std::shared_ptr<flat_params> shared_published() const {
    return adapter_ ? adapter_->weights() : params_;
  }
  /// Uses `p` as the published weights (set_adapters' or set_params' checks apply).
  void set_published(std::shared_ptr<flat_params> p);

  /// The true on-policy mode: on CUDA every forward, score_rows and the engine's head run the
  /// batch-invariant kernels (invariant_ops.hpp), so a token gets the same bits in the serving and
  /// the training forward; the fused serving kernels and the grouped expert GEMMs are left out.
  /// (The CPU path is batch-invariant already.) Throws std::invalid_argument naming why a model
  /// cannot (dtype, head size, LoRA adapters).
  void set_batch_invariant(bool on);
  bool batch_invariant() const { return batch_invariant_; }

  const std::string& config_json() const { return config_json_; }
  at::ScalarType dtype() const { return dtype_; }
  at::Device device() const { return device_; }

  /// One packed pass over all segments (both paths).
  forward_result forward(const std::vector<segment>& segments, const forward_options& opt) const;

  /// log p(target | row) at `temperature` over the full vocabulary, and the entropy of that
  /// distribution, `chunk` rows at a time: peak extra memory O(chunk x vocab).
  token_scores score_rows(const at::Tensor& hidden, const at::Tensor& targets, double temperature,
                          int64_t chunk = 256) const;
  /// Full logits at `temperature` for a few rows (sampling), computed like score_rows.
  at::Tensor logits_rows(const at::Tensor& hidden, double temperature) const;
  /// The output projection [vocab, hidden] (the embedding when the model ties them).
  const at::Tensor& lm_head() const;

  /// Path (a) end to end: for each sequence of length L, the L-1 log-probs of tokens 1..L-1 and the
  /// entropies, from one packed forward.
  /// With `adapters_off`, the base's (LoRA: the reference model).
  std::vector<token_scores> score_sequences(const std::vector<std::vector<int64_t>>& seqs,
                                            double temperature, int64_t chunk = 256,
                                            forward_result* details = nullptr,
                                            bool adapters_off = false) const;

  /// A paged cache for this model.
  kv_cache make_cache(int64_t num_blocks, int64_t block_size) const;
  /// Bytes one KV block of `block_size` tokens takes over all layers.
  int64_t kv_block_bytes(int64_t block_size) const;

 private:
  decoder(model_config config, std::string config_json, std::unique_ptr<flat_params> params,
          at::ScalarType dtype, at::Device device);

  model_config config_;
  std::string config_json_;
  std::shared_ptr<flat_params> params_;
  std::unique_ptr<lora_adapter> adapter_;  ///< LoRA (null: none)
  at::ScalarType dtype_;
  at::Device device_;
  at::Tensor inv_freq_;
  bool batch_invariant_ = false;
};

/// The model a benchmark runs: the Hugging Face folder `dir` when given, else Qwen3-0.6B's
/// architecture with random weights (`layers` > 0 keeps only that many layers). `name` says which.
std::unique_ptr<decoder> benchmark_model(const std::string& dir, int64_t layers,
                                         at::ScalarType dtype, at::Device device,
                                         std::string& name);

/// The chunked log-prob kernel behind decoder::score_rows: `hidden` [n, d] against `head`
/// [vocab, d], `chunk` rows at a time, so peak extra memory is O(chunk x vocab). On the CPU
/// autograd differentiates its operations; on CUDA it is one autograd function that keeps only each
/// row's log-sum-exp and entropy and computes each chunk's logits again in the backward (its chunks
/// are then at least 2^28 / vocab rows, so that the head's gradient GEMMs stay large).
/// `invariant`: on CUDA the head's GEMM is the batch-invariant one (the true on-policy mode).
token_scores chunked_scores(const at::Tensor& hidden, const at::Tensor& head,
                            const at::Tensor& targets, double temperature, int64_t chunk,
                            bool invariant = false);
/// fp32 logits of `hidden` [n, d] against `head` [vocab, d] at `temperature` (the head GEMM in the
/// weights' dtype, then fp32); on the CPU the rows are padded to a multiple of 8 and kept padded.
at::Tensor padded_head_logits(const at::Tensor& hidden, const at::Tensor& head, double temperature,
                              bool invariant = false);

/// The names and shapes of every parameter of a model, in the Hugging Face layout.
std::vector<std::pair<std::string, std::vector<int64_t>>> parameter_specs(const model_config& c);

}  // namespace milesrt::llm
