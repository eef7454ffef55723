#include "actors/lib/llm/peft_io.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <system_error>

#include "actors/lib/llm/model_folder.hpp"
#include "actors/lib/llm/safetensors.hpp"
#include "runtime/core/untrusted_text.hpp"
#include "runtime/core/user_file.hpp"

namespace milesrt::llm {
namespace fs = std::filesystem;

namespace {

constexpr const char* kConfigFile = "adapter_config.json";
constexpr const char* kWeightsFile = "adapter_model.safetensors";

std::string dims(const std::vector<int64_t>& shape) {
  std::string s;
  for (auto d : shape) s += (s.empty() ? "" : ", ") + std::to_string(d);
  return "[" + s + "]";
}

/// Whether a peft field holds something other than "nothing" (null, false, "", [], {}).
bool is_set(const nlohmann::json& j) {
  if (j.is_null()) return false;
  if (j.is_boolean()) return j.get<bool>();
  if (j.is_string()) return !j.get<std::string>().empty();
  if (j.is_array() || j.is_object()) return !j.empty();
  return true;
}

/// A module name of target_modules: the short name ("q_proj") or a path ending in one
/// ("self_attn.q_proj", "model.layers.0.mlp.up_proj" is refused: per-layer targets).
std::string short_module(const std::string& name) {
  const auto dot = name.rfind('.');
  if (dot == std::string::npos) return name;
  const std::string tail = name.substr(dot + 1);
  return name == lora_module_path(tail) ? tail : name;
}

}  // namespace

void save_peft_adapter(const fs::path& dir, const model_config& m, const lora_config& c,
                       const flat_params& adapters, const std::string& base_model) {
  const auto specs = lora_parameter_specs(m, c);
  TORCH_CHECK(adapters.names().size() == specs.size(),
              "save_peft_adapter: the adapters do not match the LoRA settings");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create " + dir.string() + ": " + ec.message());
  nlohmann::json cfg = {
      {"peft_type", "LORA"},
      {"task_type", "CAUSAL_LM"},
      {"base_model_name_or_path", base_model},
      {"r", c.rank},
      {"lora_alpha", c.alpha},
      {"lora_dropout", c.dropout},
      {"use_rslora", c.use_rslora},
      {"target_modules", c.target_modules},
      {"target_parameters",
       c.target_parameters.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.target_parameters)},
      {"bias", "none"},
      {"use_dora", false},
      {"fan_in_fan_out", false},
      {"modules_to_save", nullptr},
      {"layers_to_transform", nullptr},
      {"layers_pattern", nullptr},
      {"rank_pattern", nlohmann::json::object()},
      {"alpha_pattern", nlohmann::json::object()},
      {"init_lora_weights", true},
      {"inference_mode", true}};
  write_text_file(dir / kConfigFile, cfg.dump(2) + "\n");
  const auto cpu = adapters.buffer().detach().to(at::kCPU, at::kFloat).contiguous();
  std::vector<tensor_bytes> tensors;
  int64_t offset = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto& [name, shape] = specs[i];
    TORCH_CHECK(adapters.names()[i] == name, "save_peft_adapter: tensor ", i, " is ",
                adapters.names()[i], ", expected ", name);
    const int64_t n = adapters.get(name).numel();
    tensors.push_back({name, dtype::f32, shape, cpu.data_ptr<float>() + offset,
                       static_cast<size_t>(n) * sizeof(float)});
    offset += n;
  }
  write_safetensors_file(dir / kWeightsFile, tensors);
}

namespace {

/// adapter_config.json as a JSON object: a regular file (a FIFO would block the read), nested at
/// most runtime::max_json_nesting levels.
nlohmann::json read_config_object(const fs::path& file) {
  const std::string where = file.string() + ": ";
  const std::string problem = runtime::regular_file_problem(file);
  if (problem == "no such file")
    throw config_error(where + "cannot read it (a peft adapter folder has one)");
  if (!problem.empty()) throw config_error(where + problem);
  std::ifstream in(file);
  if (!in) throw config_error(where + "cannot read it (a peft adapter folder has one)");
  std::stringstream text;
  text << in.rdbuf();
  if (auto deep = runtime::json_nesting_problem(text.str()); !deep.empty())
    throw config_error(where + deep);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str());
  } catch (const std::exception& e) {
    throw config_error(where + "not JSON: " + e.what());
  }
  if (!j.is_object()) throw config_error(where + "expected a JSON object");
  return j;
}

/// adapter_config.json's fields, read as peft writes them: an absent field reads as null, and a
/// refusal names the file and the field.
struct peft_fields {
  const nlohmann::json& j;
  std::string where;  ///< "<file>: "

  nlohmann::json operator()(const char* name) const {
    return j.contains(name) ? j[name] : nlohmann::json();
  }
  [[noreturn]] void refuse(const std::string& name, const std::string& why) const {
    throw config_error(where + "field '" + name + "': " + why);
  }
};

/// r, lora_alpha, lora_dropout and use_rslora, with peft's defaults.
void read_numbers(const peft_fields& field, lora_config& c) {
  const auto r = field("r");
  if (!r.is_number_integer()) field.refuse("r", "must be an integer");
  c.rank = r.get<int64_t>();
  const auto alpha = field("lora_alpha");
  if (!alpha.is_null() && !alpha.is_number()) field.refuse("lora_alpha", "must be a number");
  c.alpha = alpha.is_null() ? 8.0 : alpha.get<double>();  // peft's default
  const auto dropout = field("lora_dropout");
  if (!dropout.is_null() && !dropout.is_number()) field.refuse("lora_dropout", "must be a number");
  c.dropout = dropout.is_null() ? 0.0 : dropout.get<double>();
  const auto rslora = field("use_rslora");
  c.use_rslora = rslora.is_boolean() && rslora.get<bool>();
}

/// What milesrt does not apply is refused, never ignored: the log-probs would differ from peft's.
void refuse_unsupported(const peft_fields& field) {
  if (is_set(field("use_dora"))) field.refuse("use_dora", "DoRA is not supported");
  if (is_set(field("modules_to_save")))
    field.refuse("modules_to_save", "fully trained extra modules are not supported");
  if (field("bias").is_string() && field("bias") != "none") {
    field.refuse("bias",
                 "'" + field("bias").get<std::string>() + "' is not supported (only \"none\")");
  }
  if (is_set(field("fan_in_fan_out"))) field.refuse("fan_in_fan_out", "is not supported");
  if (is_set(field("layers_to_transform")))
    field.refuse("layers_to_transform", "adapters on some layers only are not supported");
  if (is_set(field("rank_pattern")))
    field.refuse("rank_pattern", "per-module ranks are not supported");
  if (is_set(field("alpha_pattern")))
    field.refuse("alpha_pattern", "per-module alphas are not supported");
  if (is_set(field("exclude_modules"))) field.refuse("exclude_modules", "is not supported");
  // Variants that change the adapted forward (initialisation-only settings, such as loftq_config
  // or init_lora_weights, do not matter once the weights are saved).
  for (const char* variant :
       {"lora_bias", "use_qalora", "use_bdlora", "layer_replication", "trainable_token_indices",
        "alora_invocation_tokens", "arrow_config", "monteclora_config", "kasa_config",
        "velora_config", "megatron_config"}) {
    if (is_set(field(variant))) field.refuse(variant, "this LoRA variant is not supported");
  }
}

/// target_modules: "all-linear" or a list of module names, kept in the forward's order.
void read_target_modules(const peft_fields& field, lora_config& c) {
  const auto targets = field("target_modules");
  if (targets.is_string()) {
    if (targets != "all-linear") {
      field.refuse("target_modules", "the pattern '" + targets.get<std::string>() +
                                         "' is not supported: list the module names");
    }
    c.target_modules = lora_module_names();
  } else if (targets.is_array()) {
    for (const auto& t : targets) {
      if (!t.is_string()) field.refuse("target_modules", "must list module names");
      c.target_modules.push_back(short_module(t.get<std::string>()));
    }
    // peft keeps target_modules as a set: its order is not the forward order.
    std::vector<std::string> ordered;
    for (const auto& known : lora_module_names()) {
      if (std::find(c.target_modules.begin(), c.target_modules.end(), known) !=
          c.target_modules.end())
        ordered.push_back(known);
    }
    if (ordered.size() ==
        std::set<std::string>(c.target_modules.begin(), c.target_modules.end()).size())
      c.target_modules = ordered;
  } else if (!targets.is_null()) {
    field.refuse("target_modules", "must list module names");
  }
}

/// target_parameters: a list of the experts' parameter names, kept in the forward's order.
void read_target_parameters(const peft_fields& field, lora_config& c) {
  const auto parameters = field("target_parameters");
  if (parameters.is_array()) {
    std::vector<std::string> listed;
    for (const auto& t : parameters) {
      if (!t.is_string()) field.refuse("target_parameters", "must list parameter names");
      listed.push_back(t.get<std::string>());
    }
    // In forward order, as for target_modules; unknown or repeated names stay for the check below.
    for (const auto& known : lora_parameter_names())
      if (std::find(listed.begin(), listed.end(), known) != listed.end())
        c.target_parameters.push_back(known);
    if (c.target_parameters.size() != listed.size()) c.target_parameters = listed;
  } else if (!parameters.is_null()) {
    field.refuse("target_parameters", "must list parameter names");
  }
}

/// Refuses settings lora_config_problems finds, naming peft's field rather than the graph's.
void check_settings(const peft_fields& field, const lora_config& c) {
  auto problems = lora_config_problems(c, nullptr);
  if (problems.empty()) return;
  const problem& p = problems.front();
  const std::pair<const char*, const char*> names[] = {{"rank", "r"},
                                                       {"alpha", "lora_alpha"},
                                                       {"dropout", "lora_dropout"},
                                                       {"targetModules", "target_modules"},
                                                       {"targetParameters", "target_parameters"}};
  for (const auto& [ours, theirs] : names) {
    if (p.field == ours) field.refuse(theirs, p.what);
  }
  throw config_error(field.where + p.text());
}

}  // namespace

lora_config read_peft_config(const fs::path& dir, std::string* base_model) {
  const fs::path file = dir / kConfigFile;
  const nlohmann::json j = read_config_object(file);
  const peft_fields field{j, file.string() + ": "};
  if (field("peft_type") != "LORA")
    field.refuse("peft_type", "'" + field("peft_type").dump() + "' is not LORA");
  lora_config c;
  read_numbers(field, c);
  refuse_unsupported(field);
  read_target_modules(field, c);
  read_target_parameters(field, c);
  check_settings(field, c);
  if (base_model != nullptr) {
    const auto base = field("base_model_name_or_path");
    *base_model = base.is_string() ? base.get<std::string>() : "";
  }
  return c;
}

peft_adapter load_peft_adapter(const fs::path& dir, const model_config& m, const fs::path& base_dir,
                               at::ScalarType dtype, at::Device device) {
  peft_adapter a;
  a.config = read_peft_config(dir, &a.base_model);
  const std::string where = (dir / kConfigFile).string() + ": ";
  if (auto problems = lora_config_problems(a.config, &m); !problems.empty())
    throw config_error(where + "for the base " + base_dir.string() + ": " +
                       problems.front().text());
  // An adapter names its base; where that is a folder here, it must be the same architecture.
  std::error_code ec;
  if (!a.base_model.empty() && fs::is_regular_file(fs::path(a.base_model) / "config.json", ec) &&
      !fs::equivalent(a.base_model, base_dir, ec)) {
    model_config theirs;
    try {
      theirs = load_config(a.base_model);
    } catch (const std::exception&) {
      theirs = model_config{};
    }
    if (theirs.hidden_size != m.hidden_size || theirs.num_layers != m.num_layers ||
        theirs.intermediate_size != m.intermediate_size || theirs.num_heads != m.num_heads ||
        theirs.num_kv_heads != m.num_kv_heads || theirs.vocab_size != m.vocab_size) {
      throw config_error(where + "field 'base_model_name_or_path': the adapter was made for " +
                         a.base_model + ", whose config.json differs from " +
                         (base_dir / "config.json").string());
    }
  }
  const fs::path weights = dir / kWeightsFile;
  if (!fs::exists(weights, ec)) throw safetensors_error(weights.string() + ": no such file");
  safetensors_checkpoint ckpt(weights);
  const auto specs = lora_parameter_specs(m, a.config);
  std::set<std::string> expected;
  for (const auto& [name, shape] : specs) expected.insert(name);
  for (const auto& name : ckpt.names()) {
    if (expected.count(name) == 0) {
      throw safetensors_error(weights.string() + ": tensor '" + name +
                              "' is not an adapter of the target_modules of " +
                              (dir / kConfigFile).string());
    }
  }
  a.weights = std::make_shared<flat_params>(specs, dtype, device);
  at::NoGradGuard no_grad;
  for (const auto& [name, shape] : specs) {
    if (!ckpt.contains(name)) {
      throw safetensors_error(weights.string() + ": missing tensor '" + name + "'");
    }
    const auto& t = ckpt.get(name);
    if (t.shape != shape) {
      throw safetensors_error(weights.string() + ": tensor '" + name + "' has shape " +
                              dims(t.shape) + ", the base " + base_dir.string() + " needs " +
                              dims(shape) + " (an adapter made for another base: " + a.base_model +
                              ")");
    }
    at::ScalarType type = at::kFloat;
    switch (t.type) {
      case dtype::f32:
        type = at::kFloat;
        break;
      case dtype::f16:
        type = at::kHalf;
        break;
      case dtype::bf16:
        type = at::kBFloat16;
        break;
    }
    auto src = at::from_blob(const_cast<uint8_t*>(t.data), shape, at::TensorOptions().dtype(type));
    const_cast<at::Tensor&>(a.weights->get(name)).copy_(src);
  }
  // Adapters of NaN or inf would turn every forward into NaN: refused here, naming the tensor.
  if (auto bad = a.weights->first_non_finite())
    throw safetensors_error(weights.string() + ": " + bad->second);
  return a;
}

}  // namespace milesrt::llm
