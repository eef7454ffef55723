#include "actors/lib/llm/config.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/core/untrusted_text.hpp"
#include "runtime/core/user_file.hpp"

namespace milesrt::llm {
namespace fs = std::filesystem;

const char* to_string(family f) {
  switch (f) {
    case family::qwen3:
      return "qwen3";
    case family::qwen2:
      return "qwen2";
    case family::llama:
      return "llama";
    case family::qwen3_moe:
      return "qwen3_moe";
  }
  return "?";
}

bool model_config::is_moe_layer(int64_t i) const {
  if (num_experts == 0) return false;
  if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), i) != mlp_only_layers.end())
    return false;
  return decoder_sparse_step > 0 && (i + 1) % decoder_sparse_step == 0;
}

int64_t model_config::num_moe_layers() const {
  int64_t n = 0;
  for (int64_t i = 0; i < num_layers; ++i) n += is_moe_layer(i);
  return n;
}

double kv_cache_bytes(const model_config& c, double blocks, double block_size,
                      double element_size) {
  return 2.0 * double(c.num_layers) * double(c.num_kv_heads) * double(c.head_dim) * block_size *
         blocks * element_size;
}

double physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? double(pages) * double(page) : 0.0;
}

model_config load_config(const fs::path& path) {
  if (!fs::exists(path)) {
    throw config_error(path.string() +
                       ": no such model folder (it needs config.json and safetensors weights)");
  }
  fs::path file = fs::is_directory(path) ? path / "config.json" : path;
  if (auto problem = runtime::regular_file_problem(file); !problem.empty())
    throw config_error(file.string() + ": " + problem);
  std::ifstream in(file);
  if (!in) throw config_error(file.string() + ": cannot read");
  std::stringstream text;
  text << in.rdbuf();
  return parse_config(text.str(), file.string());
}

namespace {

// Fields of one config.json, each refusal naming the file and the field.
struct config_fields {
  const nlohmann::json& j;
  const std::string& origin;

  config_error fail(const std::string& field, const std::string& what) const {
    return config_error(origin + ": field '" + field + "': " + what);
  }
  bool has(const std::string& key) const { return j.contains(key) && !j.at(key).is_null(); }
  int64_t get_int(const std::string& key, std::optional<int64_t> fallback = std::nullopt) const {
    if (!has(key)) {
      if (fallback) return *fallback;
      throw fail(key, "missing");
    }
    const auto& v = j.at(key);
    if (!v.is_number_integer() ||
        (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))) {
      throw fail(key, "must be an integer, got " + v.dump());
    }
    const int64_t x = v.get<int64_t>();
    if (x < 0) throw fail(key, "must not be negative");
    return x;
  }
  // A size from 1 to `hi` (docs/limits.md, "Model folders").
  int64_t get_size(const std::string& key, int64_t hi,
                   std::optional<int64_t> fallback = std::nullopt) const {
    const int64_t v = get_int(key, fallback);
    if (v < 1 || v > hi) {
      throw fail(key, "must be from 1 to " + std::to_string(hi) + ", got " + std::to_string(v));
    }
    return v;
  }
  double get_num(const std::string& key, double fallback) const {
    if (!has(key)) return fallback;
    if (!j.at(key).is_number()) throw fail(key, "must be a number");
    return j.at(key).get<double>();
  }
  bool get_bool(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j.at(key).is_boolean()) throw fail(key, "must be true or false");
    return j.at(key).get<bool>();
  }
  std::string get_string(const std::string& key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j.at(key).is_string()) throw fail(key, "must be a string");
    return j.at(key).get<std::string>();
  }
};

// Rotary embeddings: transformers 5 writes rope_parameters, older configs
// rope_theta/rope_scaling.
void read_rope(const config_fields& f, model_config& c) {
  const nlohmann::json& j = f.j;
  nlohmann::json rope = nlohmann::json::object();
  std::string rope_field = "rope_scaling";
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    rope = j["rope_parameters"];
    rope_field = "rope_parameters";
  } else if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) {
    rope = j["rope_scaling"];
  }
  if (rope.contains("rope_theta") && !rope["rope_theta"].is_number())
    throw f.fail(rope_field + ".rope_theta", "must be a number");
  c.rope_theta = rope.contains("rope_theta") ? rope["rope_theta"].get<double>()
                                             : f.get_num("rope_theta", 10000.0);
  if (!(c.rope_theta > 1 && std::isfinite(c.rope_theta)))
    throw f.fail("rope_theta", "must be a finite number above 1");
  std::string rope_type = rope.value("rope_type", rope.value("type", std::string("default")));
  if (rope_type == "llama3") {
    llama3_rope r;
    r.factor = rope.value("factor", r.factor);
    r.low_freq_factor = rope.value("low_freq_factor", r.low_freq_factor);
    r.high_freq_factor = rope.value("high_freq_factor", r.high_freq_factor);
    r.original_max_position_embeddings =
        rope.value("original_max_position_embeddings", r.original_max_position_embeddings);
    c.rope_llama3 = r;
  } else if (rope_type != "default") {
    throw f.fail(rope_field, "rope_type '" + rope_type + "' is not supported (default, llama3)");
  }
}

// Mixture of experts (Qwen3-MoE).
void read_moe(const config_fields& f, model_config& c) {
  using limits = config_limits;
  const nlohmann::json& j = f.j;
  c.num_experts = j.contains("num_experts") ? f.get_size("num_experts", limits::max_experts)
                                            : f.get_size("num_local_experts", limits::max_experts);
  c.num_experts_per_tok = f.get_int("num_experts_per_tok");
  if (c.num_experts_per_tok == 0 || c.num_experts_per_tok > c.num_experts) {
    throw f.fail("num_experts_per_tok", "must be between 1 and num_experts");
  }
  c.moe_intermediate_size = f.get_size("moe_intermediate_size", limits::max_intermediate_size);
  c.norm_topk_prob = f.get_bool("norm_topk_prob", false);
  c.decoder_sparse_step = f.get_int("decoder_sparse_step", 1);
  if (j.contains("mlp_only_layers") && j["mlp_only_layers"].is_array()) {
    for (auto& l : j["mlp_only_layers"]) c.mlp_only_layers.push_back(l.get<int64_t>());
  }
  c.router_aux_loss_coef = f.get_num("router_aux_loss_coef", 0.001);
}

}  // namespace

model_config parse_config(const std::string& json_text, const std::string& origin) {
  if (auto deep = runtime::json_nesting_problem(json_text); !deep.empty())
    throw config_error(origin + ": " + deep);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const std::exception& e) {
    const std::string m = e.what();  // "[json.exception.parse_error.101] parse error at ..."
    const auto tag = m.find("] ");
    throw config_error(origin +
                       ": not valid JSON: " + (tag == std::string::npos ? m : m.substr(tag + 2)));
  }
  if (!j.is_object()) {
    throw config_error(origin + ": expected a JSON object (a Hugging Face config.json), got " +
                       std::string(j.type_name()));
  }
  const config_fields f{j, origin};
  model_config c;
  const std::string model_type = f.get_string("model_type", "");
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string()) {
    c.architecture = j["architectures"][0].get<std::string>();
  }
  if (model_type == "qwen3")
    c.arch = family::qwen3;
  else if (model_type == "qwen2")
    c.arch = family::qwen2;
  else if (model_type == "llama")
    c.arch = family::llama;
  else if (model_type == "qwen3_moe")
    c.arch = family::qwen3_moe;
  else
    throw f.fail("model_type",
                 "'" + model_type + "' is not supported (qwen3, qwen2, llama, qwen3_moe)");

  const std::string act = f.get_string("hidden_act", "silu");
  if (act != "silu") throw f.fail("hidden_act", "'" + act + "' is not supported (silu)");
  using limits = config_limits;
  c.vocab_size = f.get_size("vocab_size", limits::max_vocab_size);
  c.hidden_size = f.get_size("hidden_size", limits::max_hidden_size);
  c.intermediate_size = f.get_size("intermediate_size", limits::max_intermediate_size);
  c.num_layers = f.get_size("num_hidden_layers", limits::max_layers);
  c.num_heads = f.get_size("num_attention_heads", limits::max_heads);
  c.num_kv_heads = f.get_size("num_key_value_heads", limits::max_heads, c.num_heads);
  if (c.num_heads % c.num_kv_heads != 0) {
    throw f.fail("num_key_value_heads", std::to_string(c.num_kv_heads) +
                                            " must divide num_attention_heads (" +
                                            std::to_string(c.num_heads) + ")");
  }
  c.head_dim = f.get_size("head_dim", limits::max_head_dim, c.hidden_size / c.num_heads);
  if (c.head_dim % 2 != 0) throw f.fail("head_dim", "must be even for rotary embeddings");
  c.rms_norm_eps = f.get_num("rms_norm_eps", 1e-6);
  if (!(c.rms_norm_eps > 0 && c.rms_norm_eps < 1)) {
    throw f.fail("rms_norm_eps", "must be above 0 and below 1, got " + j["rms_norm_eps"].dump());
  }
  c.tie_word_embeddings = f.get_bool("tie_word_embeddings", false);
  c.attention_bias = c.arch == family::qwen2 ? true : f.get_bool("attention_bias", false);
  c.qk_norm = c.arch == family::qwen3 || c.arch == family::qwen3_moe;
  if (f.get_bool("mlp_bias", false)) throw f.fail("mlp_bias", "true is not supported");
  if (f.get_bool("use_sliding_window", false))
    throw f.fail("use_sliding_window", "true is not supported");

  read_rope(f, c);
  if (c.arch == family::qwen3_moe) read_moe(f, c);
  return c;
}

}  // namespace milesrt::llm
