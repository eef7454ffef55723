// Model files in and out: a Hugging Face folder's config.json and safetensors weights loaded into a
// decoder (or its config on parameters another decoder holds), random weights for benchmarks and
// tests, and a decoder saved so that transformers loads it.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "actors/lib/llm/model.hpp"
#include "actors/lib/llm/model_folder.hpp"
#include "actors/lib/llm/safetensors.hpp"

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

namespace {

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

}  // namespace milesrt::llm
