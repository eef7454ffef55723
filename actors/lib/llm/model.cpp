#include "actors/lib/llm/model.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "actors/lib/llm/device.hpp"
#include "actors/lib/llm/invariant_ops.hpp"
#include "actors/lib/llm/model_folder.hpp"
#include "actors/lib/llm/paged_forward.hpp"
#include "actors/lib/llm/row_ops.hpp"
#include "actors/lib/llm/safetensors.hpp"
#include "actors/lib/llm/train_ops.hpp"
#include "kernels/attention/paged_attention.hpp"
#include "kernels/decoder/decoder_kernels.hpp"

namespace milesrt::llm {
namespace fs = std::filesystem;

std::unique_ptr<decoder> benchmark_model(const std::string& dir, int64_t layers,
                                         at::ScalarType dtype, at::Device device,
                                         std::string& name) {
  if (!dir.empty()) {
    name = dir;
    return decoder::load(dir, dtype, device);
  }
  // The architecture of Qwen3-0.6B.
  auto cfg = nlohmann::json::parse(R"({"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"],
    "vocab_size": 151936, "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
    "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0, "tie_word_embeddings": true, "hidden_act": "silu"})");
  if (layers > 0) cfg["num_hidden_layers"] = layers;
  name = "Qwen3-0.6B architecture (" + std::to_string(cfg["num_hidden_layers"].get<int>()) +
         " layers), random weights";
  return decoder::random(cfg.dump(), dtype, device, 1);
}

std::vector<std::pair<std::string, std::vector<int64_t>>> parameter_specs(const model_config& c) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> s;
  const int64_t h = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  s.push_back({"model.embed_tokens.weight", {c.vocab_size, h}});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    s.push_back({p + "input_layernorm.weight", {h}});
    s.push_back({p + "self_attn.q_proj.weight", {q, h}});
    s.push_back({p + "self_attn.k_proj.weight", {kv, h}});
    s.push_back({p + "self_attn.v_proj.weight", {kv, h}});
    if (c.attention_bias) {
      s.push_back({p + "self_attn.q_proj.bias", {q}});
      s.push_back({p + "self_attn.k_proj.bias", {kv}});
      s.push_back({p + "self_attn.v_proj.bias", {kv}});
    }
    s.push_back({p + "self_attn.o_proj.weight", {h, q}});
    if (c.qk_norm) {
      s.push_back({p + "self_attn.q_norm.weight", {c.head_dim}});
      s.push_back({p + "self_attn.k_norm.weight", {c.head_dim}});
    }
    s.push_back({p + "post_attention_layernorm.weight", {h}});
    if (c.is_moe_layer(i)) {
      s.push_back({p + "mlp.gate.weight", {c.num_experts, h}});
      for (int64_t e = 0; e < c.num_experts; ++e) {
        const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
        s.push_back({x + "gate_proj.weight", {c.moe_intermediate_size, h}});
        s.push_back({x + "up_proj.weight", {c.moe_intermediate_size, h}});
        s.push_back({x + "down_proj.weight", {h, c.moe_intermediate_size}});
      }
    } else {
      s.push_back({p + "mlp.gate_proj.weight", {c.intermediate_size, h}});
      s.push_back({p + "mlp.up_proj.weight", {c.intermediate_size, h}});
      s.push_back({p + "mlp.down_proj.weight", {h, c.intermediate_size}});
    }
  }
  s.push_back({"model.norm.weight", {h}});
  if (!c.tie_word_embeddings) s.push_back({"lm_head.weight", {c.vocab_size, h}});
  return s;
}

// -- rotary frequencies, checkpoint dtypes -----------------------------------------------------

namespace {

at::Tensor make_inv_freq(const model_config& c) {
  auto idx = at::arange(0, c.head_dim, 2, at::kLong).to(at::kFloat);
  auto inv = 1.0 / at::pow(at::scalar_tensor(c.rope_theta, at::kFloat), idx / double(c.head_dim));
  if (c.rope_llama3) {
    const auto& r = *c.rope_llama3;
    const double low_wavelen = r.original_max_position_embeddings / r.low_freq_factor;
    const double high_wavelen = r.original_max_position_embeddings / r.high_freq_factor;
    auto wavelen = 2 * M_PI / inv;
    auto scaled = at::where(wavelen > low_wavelen, inv / r.factor, inv);
    auto smooth = (r.original_max_position_embeddings / wavelen - r.low_freq_factor) /
                  (r.high_freq_factor - r.low_freq_factor);
    auto smoothed = (1 - smooth) * scaled / r.factor + smooth * scaled;
    auto medium = at::logical_and(wavelen >= high_wavelen, wavelen <= low_wavelen);
    inv = at::where(medium, smoothed, scaled);
  }
  return inv;
}

at::ScalarType to_scalar(dtype d) {
  switch (d) {
    case dtype::f32:
      return at::kFloat;
    case dtype::f16:
      return at::kHalf;
    case dtype::bf16:
      return at::kBFloat16;
  }
  return at::kFloat;
}

dtype from_scalar(at::ScalarType t) {
  if (t == at::kFloat) return dtype::f32;
  if (t == at::kHalf) return dtype::f16;
  if (t == at::kBFloat16) return dtype::bf16;
  throw std::invalid_argument("unsupported parameter dtype");
}

}  // namespace

// -- the decoder --------------------------------------------------------------------------------

decoder::decoder(model_config config, std::string config_json, std::unique_ptr<flat_params> params,
                 at::ScalarType dtype, at::Device device)
    : config_(std::move(config)),
      config_json_(std::move(config_json)),
      params_(std::move(params)),
      dtype_(dtype),
      // Where the weights are, with its index ("cuda" asked for is "cuda:0" here): transports
      // compare it with the device of the buffers they hand over.
      device_(params_ && params_->buffer().defined() ? params_->buffer().device() : device) {
  inv_freq_ = make_inv_freq(config_).to(device_);
}

std::unique_ptr<decoder> decoder::load(const fs::path& dir, at::ScalarType dtype,
                                       at::Device device) {
  auto config = load_config(dir);
  std::ifstream in(dir / "config.json");
  std::stringstream text;
  text << in.rdbuf();
  safetensors_checkpoint ckpt(dir);
  auto specs = parameter_specs(config);
  check_weights(ckpt, config);
  auto params = std::make_unique<flat_params>(specs, dtype, device);
  for (const auto& [name, shape] : specs) {
    const auto& t = ckpt.get(name);
    auto src = at::from_blob(const_cast<uint8_t*>(t.data), shape,
                             at::TensorOptions().dtype(to_scalar(t.type)));
    params->get(name).copy_(src);
  }
  // NaN or inf weights would be served (NaN log-probs, exit 0) or trained on: refused here,
  // naming the file and the tensor. Checked as loaded, so a value that overflows `dtype` counts.
  if (auto bad = params->first_non_finite()) {
    const auto& t = ckpt.get(bad->first);
    auto src = at::from_blob(const_cast<uint8_t*>(t.data), params->get(bad->first).sizes(),
                             at::TensorOptions().dtype(to_scalar(t.type)));
    const bool overflowed = at::isfinite(src).all().item<bool>();
    throw safetensors_error(t.file + ": " + bad->second +
                            (overflowed ? std::string(" once converted to ") + at::toString(dtype) +
                                              " (the file's values are too large for it)"
                                        : std::string()));
  }
  return std::unique_ptr<decoder>(
      new decoder(std::move(config), text.str(), std::move(params), dtype, device));
}

std::unique_ptr<decoder> decoder::with_params(const fs::path& dir,
                                              std::shared_ptr<flat_params> params) {
  auto config = load_config(dir);
  std::ifstream in(dir / "config.json");
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  for (auto& [name, shape] : parameter_specs(config)) {
    names.push_back(name);
    shapes.push_back(shape);
  }
  if (!params || params->names() != names || params->shapes() != shapes)
    throw std::invalid_argument((dir / "config.json").string() +
                                ": the shared parameters are not this config's");
  const auto dtype = params->buffer().scalar_type();
  const auto device = params->buffer().device();
  auto d =
      std::unique_ptr<decoder>(new decoder(std::move(config), text.str(), nullptr, dtype, device));
  d->params_ = std::move(params);
  d->device_ = device;
  return d;
}

std::unique_ptr<decoder> decoder::random(const std::string& config_json, at::ScalarType dtype,
                                         at::Device device, uint64_t seed) {
  auto config = parse_config(config_json, "config");
  auto params = std::make_unique<flat_params>(parameter_specs(config), dtype, device);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (const auto& name : params->names()) {
    auto& t = const_cast<at::Tensor&>(params->get(name));
    auto values = at::randn(t.sizes(), gen, at::TensorOptions().dtype(at::kFloat));
    values = name.find("norm") != std::string::npos ? 1.0 + 0.1 * values : 0.02 * values;
    t.copy_(values);
  }
  return std::unique_ptr<decoder>(
      new decoder(std::move(config), config_json, std::move(params), dtype, device));
}

void decoder::save(const fs::path& dir, uint64_t max_shard_bytes,
                   const flat_params* weights) const {
  const flat_params& P = weights != nullptr ? *weights : *params_;
  TORCH_CHECK(P.names() == params_->names() && P.shapes() == params_->shapes(),
              "save: the weights do not have this model's names and shapes");
  fs::create_directories(dir);
  write_text_file(dir / "config.json", config_json_);
  auto cpu = P.buffer().detach().to(at::kCPU).contiguous();
  // Views into the CPU copy, in the same order and layout as the flat buffer.
  std::vector<tensor_bytes> tensors;
  int64_t offset = 0;
  const size_t elem = cpu.element_size();
  for (const auto& name : P.names()) {
    const auto& v = P.get(name);
    tensor_bytes t;
    t.name = name;
    t.type = from_scalar(v.scalar_type());
    t.shape = v.sizes().vec();
    t.data = static_cast<const uint8_t*>(cpu.data_ptr()) + offset * elem;
    t.nbytes = v.numel() * elem;
    offset += v.numel();
    tensors.push_back(t);
  }
  write_safetensors(dir, tensors, max_shard_bytes);
}

void decoder::set_params(std::shared_ptr<flat_params> p) {
  TORCH_CHECK(p != nullptr, "set_params: no parameters");
  TORCH_CHECK(p->names() == params_->names() && p->shapes() == params_->shapes(),
              "set_params: the parameters do not have this model's names and shapes (LoRA "
              "adapters for a model without LoRA settings?)");
  TORCH_CHECK(p->buffer().scalar_type() == dtype_ && p->buffer().device() == device_,
              "set_params: the parameters have another dtype or device");
  params_ = std::move(p);
}

void decoder::set_batch_invariant(bool on) {
  if (on) {
    const auto why =
        invariant_ops::problem(device_, dtype_, adapters_ != nullptr, config_.head_dim);
    if (!why.empty()) throw std::invalid_argument(why);
  }
  batch_invariant_ = on;
}

const at::Tensor& decoder::lm_head() const {
  return config_.tie_word_embeddings ? params_->get("model.embed_tokens.weight")
                                     : params_->get("lm_head.weight");
}

int64_t decoder::kv_block_bytes(int64_t block_size) const {
  return 2 * config_.num_layers * block_size * config_.num_kv_heads * config_.head_dim *
         static_cast<int64_t>(c10::elementSize(dtype_));
}

namespace {
/// Whether the serving forward on this device reads the cache through the paged kernels.
bool use_paged_kernels(at::Device device, at::ScalarType dtype, const model_config& c) {
  return device.is_cuda() && dtype == at::kBFloat16 &&
         kernels::paged_attention_supported(static_cast<int>(c.head_dim));
}
}  // namespace

kv_cache decoder::make_cache(int64_t num_blocks, int64_t block_size) const {
  kv_cache c;
  c.block_size = block_size;
  c.num_blocks = num_blocks;
  auto opts = at::TensorOptions().dtype(dtype_).device(device_);
  for (int64_t i = 0; i < config_.num_layers; ++i) {
    c.k.push_back(
        at::zeros({num_blocks * block_size, config_.num_kv_heads, config_.head_dim}, opts));
    c.v.push_back(
        at::zeros({num_blocks * block_size, config_.num_kv_heads, config_.head_dim}, opts));
  }
  if (use_paged_kernels(device_, dtype_, config_)) {
    auto bytes = at::TensorOptions().dtype(at::kByte);
    c.attention_float_ws =
        at::empty({int64_t(kernels::kAttentionFloatWorkspaceBytes)}, bytes.device(device_));
    c.attention_int_ws =
        at::empty({int64_t(kernels::kAttentionIntWorkspaceBytes)}, bytes.device(device_));
    c.attention_pinned_ws =
        at::empty({int64_t(kernels::kAttentionIntWorkspaceBytes)}, bytes.pinned_memory(true));
  }
  return c;
}

namespace {

/// Cache slots of positions [from, to) of a sequence.
at::Tensor slots(const std::vector<int32_t>& table, int64_t block_size, int64_t from, int64_t to,
                 at::Device device) {
  std::vector<int64_t> s;
  s.reserve(to - from);
  for (int64_t p = from; p < to; ++p) {
    int64_t block = p / block_size;
    TORCH_CHECK(block < static_cast<int64_t>(table.size()), "block table of ", table.size(),
                " blocks is too short for position ", p);
    s.push_back(int64_t(table[block]) * block_size + p % block_size);
  }
  return at::tensor(s, at::kLong).to(device);
}

/// The packed training batch's cumulative sequence lengths for variable-length attention
/// (undefined where the training path does not use it).
struct varlen_batch {
  at::Tensor cu_seqlens;  ///< [segments + 1] int32 on the device
  int64_t max_len = 0;
  double scale = 1;
};

/// libtorch's flash attention covers fp16/bf16 on CUDA with head sizes up to 256.
varlen_batch training_varlen(const std::vector<segment>& segments, const forward_options& opt,
                             const model_config& c, at::Device device, at::ScalarType dtype) {
  varlen_batch b;
  if (!device.is_cuda() || opt.cache != nullptr || opt.step != nullptr) return b;
  if (dtype != at::kBFloat16 && dtype != at::kHalf) return b;
  if (c.head_dim % 8 != 0 || c.head_dim > 256 || segments.empty()) return b;
  std::vector<int32_t> cu{0};
  for (const auto& s : segments) {
    const auto n = static_cast<int64_t>(s.ids.size());
    b.max_len = std::max(b.max_len, n);
    cu.push_back(cu.back() + static_cast<int32_t>(n));
  }
  b.cu_seqlens = at::tensor(cu, at::kInt).to(device);
  b.scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  return b;
}

/// Causal attention of every packed segment at once: q [T, heads, d], k and v [T, kv_heads, d]
/// (grouped-query heads are the kernel's own); autograd runs flash attention's backward.
at::Tensor varlen_attention(const varlen_batch& b, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v) {
  auto out =
      at::_flash_attention_forward(q.contiguous(), k.contiguous(), v.contiguous(), b.cu_seqlens,
                                   b.cu_seqlens, b.max_len, b.max_len, 0.0, /*is_causal=*/true,
                                   /*return_debug_mask=*/false, b.scale);
  return std::get<0>(out);
}

}  // namespace

namespace {

/// One forward's inputs on the device, the paths they take (the paged serving batch, the training
/// path's variable-length attention and kernels), and the decoder's blocks over them.
struct forward_pass {
  forward_pass(const model_config& config, const flat_params& params,
               const std::vector<segment>& segs, const forward_options& options, at::Device dev,
               at::ScalarType type, const at::Tensor& inv_freq, bool batch_invariant);

  /// The residual stream between blocks: h and the last block's output `delta` (undefined: none),
  /// which the next norm adds to h (in the same pass on the training kernels).
  struct residual {
    at::Tensor h, delta;
  };
  /// One decoder layer: the stream at its input -> at its output. `record` keeps the MoE routing
  /// in the result (off when a checkpointed layer is computed again).
  residual run_layer(int64_t layer, residual s, bool record);
  at::Tensor norm(const at::Tensor& x, const at::Tensor& w) const {
    return train_kernels ? train_ops::rms_norm(x, w, c.rms_norm_eps)
                         : row_ops::rms_norm(x, w, c.rms_norm_eps);
  }
  /// s.h += s.delta (when pending), then RMSNorm(s.h) * w.
  at::Tensor add_norm(residual& s, const at::Tensor& w) const {
    if (!s.delta.defined()) return norm(s.h, w);
    if (train_kernels) {
      auto [sum, y] = train_ops::add_rms_norm(s.h, s.delta, w, c.rms_norm_eps);
      s = {sum, at::Tensor()};
      return y;
    }
    s = {s.h + s.delta, at::Tensor()};
    return norm(s.h, w);
  }
  /// The embedding rows of the tokens.
  at::Tensor embed_rows() const {
    const auto& e = P.get("model.embed_tokens.weight");
    return train_kernels ? train_ops::embedding(e, ids) : e.index_select(0, ids);
  }
  at::Tensor linear(const at::Tensor& x, const at::Tensor& w) const {
    return train_kernels ? train_ops::linear(x, w, invariant) : row_ops::linear_rows(x, w);
  }
  /// y, the projection `module` of x, plus its LoRA term when the module is adapted.
  at::Tensor adapted(at::Tensor y, int64_t layer, const char* module, const at::Tensor& x) const {
    auto d = lora_delta(lora, layer, module, x);
    return d.defined() ? y + d : y;
  }

  const model_config& c;
  const flat_params& P;
  const std::vector<segment>& segments;
  const forward_options& opt;
  const at::Device device;
  const at::ScalarType dtype;
  int64_t T = 0;   ///< tokens
  int64_t Tp = 0;  ///< rows: on the CPU T padded to a multiple of 8 (at least 8)
  bool paged = false;
  paged_step batch;     ///< the paged serving batch (when `paged`)
  at::Tensor ids, pos;  ///< [Tp] int64 on the device
  std::pair<at::Tensor, at::Tensor> rope;
  varlen_batch varlen;
  bool train_kernels = false;
  bool invariant = false;           ///< the true on-policy mode on CUDA (invariant_ops.hpp)
  invariant_ops::packed_keys keys;  ///< its packed training batch (no cache)
  lora_view lora;                   ///< the adapters this forward applies (none: the base)
  forward_result result;

 private:
  /// The router's choice for a MoE layer: probabilities [Tp, E], top-k weights and experts [Tp, k].
  struct routing {
    at::Tensor probs, weights, chosen;
  };

  at::Tensor rotate(const at::Tensor& x) const {
    return train_kernels ? train_ops::rope(x, rope.first, rope.second)
                         : row_ops::apply_rope(x, rope);
  }
  at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up) const {
    return train_kernels ? train_ops::silu_mul(gate, up) : at::silu(gate) * up;
  }
  /// The layer's self-attention of the stream's norm (which takes in its pending delta).
  at::Tensor attention(int64_t layer, const std::string& p, residual& s) const;
  at::Tensor segment_attention(int64_t layer, const at::Tensor& q, const at::Tensor& k,
                               const at::Tensor& v) const;
  /// The dense MLP of x (the post-attention norm's output).
  at::Tensor dense_ffn(int64_t layer, const std::string& p, const at::Tensor& x) const;
  /// The mixture of experts of x (the post-attention norm's output).
  at::Tensor moe_ffn(int64_t layer, const std::string& p, const at::Tensor& x, bool record);
  routing route(int64_t layer, const std::string& p, const at::Tensor& x) const;
  at::Tensor moe_by_expert(int64_t layer, const std::string& p, const at::Tensor& x,
                           const routing& r) const;
};

forward_pass::forward_pass(const model_config& config, const flat_params& params,
                           const std::vector<segment>& segs, const forward_options& options,
                           at::Device dev, at::ScalarType type, const at::Tensor& inv_freq,
                           bool batch_invariant)
    : c(config),
      P(params),
      segments(segs),
      opt(options),
      device(dev),
      dtype(type),
      invariant(batch_invariant && dev.is_cuda()) {
  std::vector<int64_t> host_ids, host_pos;
  static const std::vector<segment> kPrepared;  // a prepared step has its ids on the device
  for (const auto& s : opt.step != nullptr ? kPrepared : segments) {
    TORCH_CHECK(s.block_table != nullptr || s.start == 0, "a segment that starts at position ",
                s.start, " needs a block table");
    TORCH_CHECK(s.block_table == nullptr || opt.cache != nullptr, "a block table needs a cache");
    for (size_t i = 0; i < s.ids.size(); ++i) {
      TORCH_CHECK(s.ids[i] >= 0 && s.ids[i] < c.vocab_size, "token id ", s.ids[i],
                  " is outside the vocabulary of ", c.vocab_size);
      host_ids.push_back(s.ids[i]);
      host_pos.push_back(s.start + static_cast<int64_t>(i));
    }
  }
  // Every activation keeps a multiple of 8 rows (padding rows hold token 0 at position 0): GEMMs
  // are then row-invariant, row reductions run serially per row, and with dimensions that are
  // multiples of 16 each element meets the same vectorized code in both paths.
  // The serving path on the GPU: one batch over the paged cache, its metadata sent in one copy
  // (or a step prepared by the caller).
  paged = opt.cache != nullptr && opt.cache->paged_kernels();
  TORCH_CHECK(opt.step == nullptr || paged, "a prepared step needs a cache with paged kernels");
  T = opt.step != nullptr ? opt.step->ids.size(0) : static_cast<int64_t>(host_ids.size());
  Tp = device.is_cuda() ? T : std::max<int64_t>(8, (T + 7) / 8 * 8);
  host_ids.resize(Tp, 0);
  host_pos.resize(Tp, 0);
  if (paged) {
    batch = opt.step != nullptr
                ? *opt.step
                : paged::make_paged_step(segments, host_ids, host_pos, *opt.cache, c);
    ids = batch.ids;
    pos = batch.positions;
  } else {
    ids = at::tensor(host_ids, at::kLong).to(device);
    pos = at::tensor(host_pos, at::kLong).to(device);
  }
  rope = row_ops::rope_tables(pos, inv_freq, dtype);
  TORCH_CHECK(!opt.checkpoint_head || opt.cache == nullptr,
              "activation checkpointing is for the training path (no cache)");

  // The training path on the GPU: one variable-length flash-attention call over all segments
  // (forward and backward), from their cumulative lengths.
  varlen = training_varlen(segments, opt, c, device, dtype);

  // With it, the element-wise layers run as the training kernels (forward and backward). In the
  // true on-policy mode both paths run them, and the batch-invariant GEMMs and attention.
  train_kernels = invariant || (varlen.cu_seqlens.defined() && train_ops::available(device, dtype));
  if (invariant && !paged) {
    TORCH_CHECK(varlen.cu_seqlens.defined(),
                "trueOnPolicy on cuda: the forward needs a paged cache or no cache");
    std::vector<int64_t> lengths;
    for (const auto& s : segments) lengths.push_back(static_cast<int64_t>(s.ids.size()));
    keys = invariant_ops::make_packed_keys(lengths, varlen.cu_seqlens, varlen.max_len);
  }
}

forward_pass::residual forward_pass::run_layer(int64_t layer, residual s, bool record) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  auto attended = attention(layer, p, s);
  s.delta = attended;
  // MLP or mixture of experts.
  auto x = add_norm(s, P.get(p + "post_attention_layernorm.weight"));
  s.delta = c.is_moe_layer(layer) ? moe_ffn(layer, p, x, record) : dense_ffn(layer, p, x);
  return s;
}

at::Tensor forward_pass::attention(int64_t layer, const std::string& p, residual& s) const {
  auto x = add_norm(s, P.get(p + "input_layernorm.weight"));
  auto q = linear(x, P.get(p + "self_attn.q_proj.weight"));
  auto k = linear(x, P.get(p + "self_attn.k_proj.weight"));
  auto v = linear(x, P.get(p + "self_attn.v_proj.weight"));
  if (c.attention_bias) {
    q = q + P.get(p + "self_attn.q_proj.bias");
    k = k + P.get(p + "self_attn.k_proj.bias");
    v = v + P.get(p + "self_attn.v_proj.bias");
  }
  q = adapted(q, layer, "self_attn.q_proj", x).view({Tp, c.num_heads, c.head_dim});
  k = adapted(k, layer, "self_attn.k_proj", x).view({Tp, c.num_kv_heads, c.head_dim});
  v = adapted(v, layer, "self_attn.v_proj", x).view({Tp, c.num_kv_heads, c.head_dim});
  if (c.qk_norm && train_kernels && c.head_dim == 128) {  // norm and rotation in one pass
    const double eps = c.rms_norm_eps;
    q = train_ops::qk_norm_rope(q, P.get(p + "self_attn.q_norm.weight"), rope.first, rope.second,
                                eps);
    k = train_ops::qk_norm_rope(k, P.get(p + "self_attn.k_norm.weight"), rope.first, rope.second,
                                eps);
  } else {
    if (c.qk_norm) {
      q = norm(q, P.get(p + "self_attn.q_norm.weight"));
      k = norm(k, P.get(p + "self_attn.k_norm.weight"));
    }
    q = rotate(q);
    k = rotate(k);
  }

  const auto attn =
      paged ? paged::paged_attend(batch, *opt.cache, layer, q, k.detach(), v.detach(), c, invariant)
                  .reshape({T, c.num_heads * c.head_dim})
            : segment_attention(layer, q, k, v);
  return adapted(linear(attn, P.get(p + "self_attn.o_proj.weight")), layer, "self_attn.o_proj",
                 attn);
}

// Attention one segment at a time (the CPU path, which keeps each position's calls
// batch-invariant, and caches the paged kernels do not cover).
at::Tensor forward_pass::segment_attention(int64_t layer, const at::Tensor& q, const at::Tensor& k,
                                           const at::Tensor& v) const {
  if (invariant)
    return invariant_ops::packed_attention(keys, q, k, v).reshape({Tp, c.num_heads * c.head_dim});
  if (varlen.cu_seqlens.defined())
    return varlen_attention(varlen, q, k, v).reshape({Tp, c.num_heads * c.head_dim});
  std::vector<at::Tensor> outs;
  int64_t row = 0;
  for (const auto& s : segments) {
    const int64_t n = static_cast<int64_t>(s.ids.size());
    auto qs = q.narrow(0, row, n), ks = k.narrow(0, row, n), vs = v.narrow(0, row, n);
    at::Tensor k_all = ks, v_all = vs;
    if (s.block_table != nullptr) {
      auto& kc = opt.cache->k[layer];
      auto& vc = opt.cache->v[layer];
      auto write = slots(*s.block_table, opt.cache->block_size, s.start, s.start + n, device);
      kc.index_copy_(0, write, ks.detach());
      vc.index_copy_(0, write, vs.detach());
      auto read = slots(*s.block_table, opt.cache->block_size, 0, s.start + n, device);
      k_all = kc.index_select(0, read);
      v_all = vc.index_select(0, read);
    }
    outs.push_back(row_ops::attend(qs, k_all, v_all, s.start, c.num_kv_heads));
    row += n;
  }
  if (Tp > T) outs.push_back(at::zeros({Tp - T, c.num_heads, c.head_dim}, q.options()));
  return at::cat(outs, 0).reshape({Tp, c.num_heads * c.head_dim});
}

at::Tensor forward_pass::dense_ffn(int64_t layer, const std::string& p, const at::Tensor& x) const {
  auto gate = adapted(linear(x, P.get(p + "mlp.gate_proj.weight")), layer, "mlp.gate_proj", x);
  auto up = adapted(linear(x, P.get(p + "mlp.up_proj.weight")), layer, "mlp.up_proj", x);
  auto act = swiglu(gate, up);
  return adapted(linear(act, P.get(p + "mlp.down_proj.weight")), layer, "mlp.down_proj", act);
}

at::Tensor forward_pass::moe_ffn(int64_t layer, const std::string& p, const at::Tensor& x,
                                 bool record) {
  const routing r = route(layer, p, x);
  // On the GPU without autograd: no host synchronisation. The grouped GEMMs know no adapters.
  const bool expert_adapters = lora && !lora.config->target_parameters.empty();
  auto out = !expert_adapters && !invariant && paged::grouped_experts(x, P, p, c)
                 ? paged::moe_grouped(x, r.weights, r.chosen, P, p, c)
                 : moe_by_expert(layer, p, x, r);
  if (record) {
    result.experts.push_back(r.chosen.narrow(0, 0, T));
    result.router_probs.push_back(r.probs.narrow(0, 0, T));
  }
  return out;
}

forward_pass::routing forward_pass::route(int64_t layer, const std::string& p,
                                          const at::Tensor& x) const {
  int64_t moe_index = 0;
  for (int64_t l = 0; l < layer; ++l) moe_index += c.is_moe_layer(l) ? 1 : 0;
  routing r;
  const auto& gate = P.get(p + "mlp.gate.weight");
  auto router_logits = invariant ? train_ops::linear(x, gate, true) : row_ops::linear_rows(x, gate);
  r.probs = at::softmax(router_logits.to(at::kFloat), -1);
  if (opt.replay_experts != nullptr) {
    TORCH_CHECK(moe_index < static_cast<int64_t>(opt.replay_experts->size()),
                "routing replay has experts for ", opt.replay_experts->size(), " MoE layers");
    r.chosen = (*opt.replay_experts)[moe_index].to(device).to(at::kLong);
    TORCH_CHECK(r.chosen.size(0) == T && r.chosen.size(1) == c.num_experts_per_tok,
                "routing replay for MoE layer ", moe_index, " must be [", T, ", ",
                c.num_experts_per_tok, "]");
    if (Tp > T)
      r.chosen = at::cat({r.chosen, r.chosen.narrow(0, 0, 1).expand({Tp - T, r.chosen.size(1)})});
    r.weights = r.probs.gather(1, r.chosen);
  } else {
    auto top = at::topk(r.probs, c.num_experts_per_tok, -1);
    r.weights = std::get<0>(top);
    r.chosen = std::get<1>(top);
  }
  if (c.norm_topk_prob) {
    at::Tensor sum = r.weights.select(1, 0).unsqueeze(1);  // in slot order, row by row
    for (int64_t s = 1; s < r.weights.size(1); ++s) sum = sum + r.weights.select(1, s).unsqueeze(1);
    r.weights = r.weights / (invariant ? sum : r.weights.sum(-1, true));
  }
  r.weights = r.weights.to(x.scalar_type());
  return r;
}

// Each expert runs once on its rows; the weighted outputs are then added slot by slot, so each
// token's sum has the same order whatever else is in the batch.
at::Tensor forward_pass::moe_by_expert(int64_t layer, const std::string& p, const at::Tensor& x,
                                       const routing& r) const {
  auto linear_rows = [this](const at::Tensor& a, const at::Tensor& w) {
    return invariant ? linear(a, w) : row_ops::linear_rows(a, w);
  };
  auto moe_out = at::zeros_like(x);
  auto chosen_cpu = r.chosen.to(at::kCPU);
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> by_expert;  // expert -> (row, slot)
  auto acc = chosen_cpu.accessor<int64_t, 2>();
  for (int64_t t = 0; t < T; ++t)  // padding rows are routed nowhere
    for (int64_t s = 0; s < c.num_experts_per_tok; ++s) by_expert[acc[t][s]].push_back({t, s});
  std::vector<at::Tensor> contrib;  // per slot: [T, hidden]
  for (int64_t s = 0; s < c.num_experts_per_tok; ++s) contrib.push_back(at::zeros_like(x));
  for (auto& [e, rows] : by_expert) {
    std::vector<int64_t> rs;
    for (auto& row_slot : rows) rs.push_back(row_slot.first);
    auto idx = at::tensor(rs, at::kLong).to(device);
    auto xe = row_ops::pad_rows(x.index_select(0, idx));
    const std::string ep = p + "mlp.experts." + std::to_string(e) + ".";
    auto gate = linear_rows(xe, P.get(ep + "gate_proj.weight"));
    auto up = linear_rows(xe, P.get(ep + "up_proj.weight"));
    // peft's gate_up_proj adapter: one delta [rows, 2I], gate's half then up's.
    if (auto d = lora_expert_delta(lora, layer, "mlp.experts.gate_up_proj", e, xe); d.defined()) {
      const int64_t I = c.moe_intermediate_size;
      gate = gate + d.narrow(1, 0, I);
      up = up + d.narrow(1, I, I);
    }
    auto act = at::silu(gate) * up;
    auto ye = linear_rows(act, P.get(ep + "down_proj.weight"));
    if (auto d = lora_expert_delta(lora, layer, "mlp.experts.down_proj", e, act); d.defined())
      ye = ye + d;
    for (int64_t s = 0; s < c.num_experts_per_tok; ++s) {
      std::vector<int64_t> sel_rows, sel_idx;
      for (size_t j = 0; j < rows.size(); ++j) {
        if (rows[j].second == s) {
          sel_rows.push_back(rows[j].first);
          sel_idx.push_back(static_cast<int64_t>(j));
        }
      }
      if (sel_rows.empty()) continue;
      auto tr = at::tensor(sel_rows, at::kLong).to(device);
      auto ti = at::tensor(sel_idx, at::kLong).to(device);
      auto w = r.weights.index_select(0, tr).select(1, s).unsqueeze(1);
      contrib[s] = contrib[s].index_add(0, tr, ye.index_select(0, ti) * w);
    }
  }
  for (int64_t s = 0; s < c.num_experts_per_tok; ++s) moe_out = moe_out + contrib[s];
  return moe_out;
}

/// Activation checkpointing: a forward without autograd keeps only the input of each of the first
/// `recomputed` layers; the later layers run with autograd, the head computes the loss from the
/// final hidden states and the backward runs through them; then each recomputed layer is
/// computed again, last to first, with autograd on, and back-propagated on its own.
forward_result checkpointed_forward(forward_pass& f) {
  const auto& c = f.c;
  const auto& embed = f.P.get("model.embed_tokens.weight");
  const int64_t recomputed =
      f.opt.checkpoint_layers > 0 ? std::min(f.opt.checkpoint_layers, c.num_layers) : c.num_layers;
  // A layer's stream folded into one tensor (h + its pending delta): what is kept per recomputed
  // layer, so checkpointing holds one [tokens, hidden] tensor a layer.
  auto fold = [](const forward_pass::residual& s) {
    return s.delta.defined() ? s.h + s.delta : s.h;
  };
  std::vector<at::Tensor> inputs;
  at::Tensor boundary;
  {
    at::NoGradGuard no_grad;
    at::Tensor h = embed.index_select(0, f.ids);
    for (int64_t layer = 0; layer < recomputed; ++layer) {
      inputs.push_back(h);
      h = fold(f.run_layer(layer, {h, at::Tensor()}, true));
    }
    boundary = h;
  }
  auto x = boundary.detach().requires_grad_(true);
  forward_pass::residual kept{x, at::Tensor()};
  for (int64_t layer = recomputed; layer < c.num_layers; ++layer)
    kept = f.run_layer(layer, kept, true);
  auto hidden = f.add_norm(kept, f.P.get("model.norm.weight")).narrow(0, 0, f.T);
  at::Tensor loss = f.opt.checkpoint_head(hidden);
  f.result.hidden = hidden.detach();
  if (!loss.defined() || !loss.requires_grad()) return std::move(f.result);
  loss.backward();
  at::Tensor g = x.grad();
  for (int64_t layer = recomputed - 1; layer >= 0 && g.defined(); --layer) {
    auto xin = inputs[layer].detach().requires_grad_(true);
    fold(f.run_layer(layer, {xin, at::Tensor()}, false)).backward(g);
    g = xin.grad();
  }
  if (g.defined() && embed.requires_grad()) f.embed_rows().backward(g);
  return std::move(f.result);
}

}  // namespace

forward_result decoder::forward(const std::vector<segment>& segments,
                                const forward_options& opt) const {
  forward_pass f(config_, *params_, segments, opt, device_, dtype_, inv_freq_, batch_invariant_);
  if (adapters_ && !merged_base_ && !opt.adapters_off)
    f.lora = lora_view{adapters_.get(), &lora_, opt.lora_dropout, opt.lora_dropout_seed};
  const auto& embed = params_->get("model.embed_tokens.weight");
  // The fused serving kernels know no adapters: an adapted model serves through the layers below.
  // In the true on-policy mode they serve the QK-norm models (Qwen3) that the mode's tests hold to
  // the training forward bit for bit; others take the layers below, projection by projection.
  if (f.paged && !f.lora && (!f.invariant || config_.qk_norm) &&
      paged::fused_serving(config_, dtype_)) {
    f.result.hidden = paged::fused_forward(*params_, config_, f.batch, *opt.cache,
                                           embed.index_select(0, f.ids), f.rope, f.invariant);
    return std::move(f.result);
  }
  if (opt.checkpoint_head) return checkpointed_forward(f);
  forward_pass::residual s{f.embed_rows(), at::Tensor()};
  for (int64_t layer = 0; layer < config_.num_layers; ++layer)
    s = f.run_layer(layer, std::move(s), true);
  f.result.hidden = f.add_norm(s, params_->get("model.norm.weight")).narrow(0, 0, f.T);
  return std::move(f.result);
}

std::pair<at::Tensor, at::Tensor> decoder::load_balance(const forward_result& r) const {
  const int64_t E = config_.num_experts;
  if (r.experts.empty()) return {at::zeros({}, at::kFloat), at::zeros({0}, at::kFloat)};
  at::Tensor loss = at::zeros({}, r.router_probs[0].options());
  at::Tensor counts = at::zeros({E}, at::kFloat);
  for (size_t l = 0; l < r.experts.size(); ++l) {
    auto onehot = at::one_hot(r.experts[l], E).to(at::kFloat);  // [T, k, E]
    auto fraction = onehot.sum(1).mean(0);                      // tokens routed to e / tokens
    auto mean_prob = r.router_probs[l].mean(0);
    loss = loss + E * (fraction * mean_prob).sum();
    counts = counts + onehot.sum(at::IntArrayRef{0, 1}).to(at::kCPU);
  }
  return {loss / double(r.experts.size()), counts / counts.sum()};
}

}  // namespace milesrt::llm
