#include "actors/lib/llm/lora.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

#include "actors/lib/llm/row_ops.hpp"

namespace milesrt::llm {

double lora_config::scale() const {
  const double r = static_cast<double>(rank);
  return use_rslora ? alpha / std::sqrt(r) : alpha / r;
}

const std::vector<std::string>& lora_module_names() {
  static const std::vector<std::string> names = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                 "gate_proj", "up_proj", "down_proj"};
  return names;
}

const std::vector<std::string>& lora_parameter_names() {
  static const std::vector<std::string> names = {"mlp.experts.gate_up_proj",
                                                 "mlp.experts.down_proj"};
  return names;
}

std::string lora_expert_tensor_name(int64_t layer, const std::string& parameter,
                                    const lora_config& c, char which) {
  // peft wraps the experts module once per parameter; the inner wrapper (gate_up_proj when both
  // are targeted) is the outer one's base_layer.
  const bool inner = c.target_parameters.size() == 2 && parameter == "mlp.experts.gate_up_proj";
  return lora_tensor_name(layer, inner ? "mlp.experts.base_layer" : "mlp.experts", which);
}

std::string lora_module_path(const std::string& module) {
  const bool attention =
      module == "q_proj" || module == "k_proj" || module == "v_proj" || module == "o_proj";
  return (attention ? "self_attn." : "mlp.") + module;
}

std::string lora_tensor_name(int64_t layer, const std::string& module_path, char which) {
  return "base_model.model.model.layers." + std::to_string(layer) + "." + module_path + ".lora_" +
         std::string(1, which) + ".weight";
}

namespace {

bool is_mlp_module(const std::string& m) {
  return m == "gate_proj" || m == "up_proj" || m == "down_proj";
}

/// [in, out] of a targeted module of layer sizes `m`.
std::pair<int64_t, int64_t> module_dims(const model_config& m, const std::string& module) {
  const int64_t h = m.hidden_size, q = m.num_heads * m.head_dim, kv = m.num_kv_heads * m.head_dim;
  if (module == "q_proj") return {h, q};
  if (module == "k_proj" || module == "v_proj") return {h, kv};
  if (module == "o_proj") return {q, h};
  if (module == "down_proj") return {m.intermediate_size, h};
  return {h, m.intermediate_size};  // gate_proj, up_proj
}

/// [in, out] of one expert's slice of a targeted expert parameter.
std::pair<int64_t, int64_t> parameter_dims(const model_config& m, const std::string& parameter) {
  const int64_t h = m.hidden_size, i = m.moe_intermediate_size;
  return parameter == "mlp.experts.down_proj" ? std::pair{i, h} : std::pair{h, 2 * i};
}

bool targets(const std::vector<std::string>& list, const std::string& name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

std::string known_modules() {
  std::string s;
  for (const auto& n : lora_module_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

problem_list lora_config_problems(const lora_config& c, const model_config* m) {
  problem_list problems;
  if (c.rank < 1 || c.rank > lora_limits::max_rank) {
    problems.push_back({"rank", "must be between 1 and " + std::to_string(lora_limits::max_rank) +
                                    " (it is " + std::to_string(c.rank) + ")"});
  }
  if (!std::isfinite(c.alpha) || !(c.alpha > 0))
    problems.push_back({"alpha", "must be finite and > 0"});
  if (!std::isfinite(c.dropout) || c.dropout < 0 || c.dropout >= 1)
    problems.push_back({"dropout", "must be in [0, 1)"});
  if (c.target_modules.empty() && c.target_parameters.empty()) {
    problems.push_back(
        {"targetModules", "must name at least one module (" + known_modules() + ")"});
  }
  std::set<std::string> seen;
  const auto& known = lora_module_names();
  for (const auto& t : c.target_modules) {
    if (std::find(known.begin(), known.end(), t) == known.end()) {
      problems.push_back(
          {"targetModules", "unknown module '" + t + "' (known: " + known_modules() + ")"});
    } else if (!seen.insert(t).second) {
      problems.push_back({"targetModules", "'" + t + "' is named twice"});
    } else if (m != nullptr && is_mlp_module(t) && m->num_moe_layers() > 0) {
      // transformers keeps the experts as fused 3-D tensors; peft adapts them through
      // target_parameters (docs/lora.md), which milesrt does not implement.
      problems.push_back(
          {"targetModules",
           "'" + t +
               "' would adapt the experts of a mixture-of-experts model, which milesrt "
               "is adapted through targetParameters (mlp.experts.gate_up_proj, "
               "mlp.experts.down_proj)"});
    }
  }
  std::set<std::string> seen_parameters;
  for (const auto& t : c.target_parameters) {
    if (!targets(lora_parameter_names(), t)) {
      problems.push_back(
          {"targetParameters", "unknown parameter '" + t +
                                   "' (known: mlp.experts.gate_up_proj, mlp.experts.down_proj)"});
    } else if (!seen_parameters.insert(t).second) {
      problems.push_back({"targetParameters", "'" + t + "' is named twice"});
    } else if (m != nullptr && m->num_moe_layers() == 0) {
      problems.push_back(
          {"targetParameters",
           "'" + t + "' names the experts of mixture-of-experts layers; the model has none"});
    }
  }
  if (!c.target_parameters.empty() && c.dropout != 0) {
    // peft's ParamWrapper refuses it too: dropout cannot be factored out of a merged weight.
    problems.push_back({"dropout", "must be 0 with targetParameters (as peft requires)"});
  }
  return problems;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> lora_parameter_specs(
    const model_config& m, const lora_config& c) {
  if (auto problems = lora_config_problems(c, &m); !problems.empty()) {
    throw config_error(within("lora", problems.front()).text());
  }
  std::vector<std::pair<std::string, std::vector<int64_t>>> specs;
  for (int64_t layer = 0; layer < m.num_layers; ++layer) {
    for (const auto& module : lora_module_names()) {
      if (std::find(c.target_modules.begin(), c.target_modules.end(), module) ==
          c.target_modules.end())
        continue;
      const auto [in, out] = module_dims(m, module);
      const auto path = lora_module_path(module);
      specs.push_back({lora_tensor_name(layer, path, 'A'), {c.rank, in}});
      specs.push_back({lora_tensor_name(layer, path, 'B'), {out, c.rank}});
    }
    if (!m.is_moe_layer(layer)) continue;
    const int64_t re = c.rank * m.num_experts;
    for (const auto& parameter : lora_parameter_names()) {
      if (!targets(c.target_parameters, parameter)) continue;
      const auto [in, out] = parameter_dims(m, parameter);
      specs.push_back({lora_expert_tensor_name(layer, parameter, c, 'A'), {re, in}});
      specs.push_back({lora_expert_tensor_name(layer, parameter, c, 'B'), {out, re}});
    }
  }
  return specs;
}

std::shared_ptr<flat_params> make_adapters(const model_config& m, const lora_config& c,
                                           at::ScalarType dtype, at::Device device, uint64_t seed) {
  auto adapters = std::make_shared<flat_params>(lora_parameter_specs(m, c), dtype, device);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < adapters->names().size(); ++i) {
    const auto& name = adapters->names()[i];
    if (name.find(".lora_A.") != std::string::npos) {
      // kaiming_uniform_(a=sqrt(5)) on [r, in]: gain sqrt(2 / 6), bound gain * sqrt(3 / in).
      const auto& shape = adapters->shapes()[i];
      const double bound = 1.0 / std::sqrt(static_cast<double>(shape[1]));
      auto values = at::empty(shape, at::kFloat).uniform_(-bound, bound, gen);
      const_cast<at::Tensor&>(adapters->get(name)).copy_(values);
    }
  }
  return adapters;
}

std::shared_ptr<flat_params> merge_adapters(const flat_params& base, const model_config& m,
                                            const lora_config& c, const flat_params& adapters) {
  at::NoGradGuard no_grad;
  const auto& b = base.buffer();
  auto out = base.copy(b.scalar_type(), b.device());
  for (int64_t layer = 0; layer < m.num_layers; ++layer) {
    for (const auto& module : lora_module_names()) {
      const auto path = lora_module_path(module);
      const auto a_name = lora_tensor_name(layer, path, 'A');
      if (!adapters.contains(a_name)) continue;
      const auto& A = adapters.get(a_name);
      const auto& B = adapters.get(lora_tensor_name(layer, path, 'B'));
      auto& W = const_cast<at::Tensor&>(
          out->get("model.layers." + std::to_string(layer) + "." + path + ".weight"));
      auto merged = W.to(at::kFloat) + at::mm(B.to(at::kFloat), A.to(at::kFloat)) * c.scale();
      W.copy_(merged);
    }
    if (!m.is_moe_layer(layer)) continue;
    const int64_t I = m.moe_intermediate_size, E = m.num_experts;
    for (const auto& parameter : c.target_parameters) {
      const auto& A = adapters.get(lora_expert_tensor_name(layer, parameter, c, 'A'));
      const auto& B = adapters.get(lora_expert_tensor_name(layer, parameter, c, 'B'));
      const auto ep = "model.layers." + std::to_string(layer) + ".mlp.experts.";
      for (int64_t e = 0; e < E; ++e) {
        auto delta = at::mm(B.to(at::kFloat).view({B.size(0), c.rank, E}).select(2, e),
                            A.to(at::kFloat).narrow(0, e * c.rank, c.rank)) *
                     c.scale();
        const auto x = ep + std::to_string(e) + ".";
        auto add = [&](const std::string& name, const at::Tensor& d) {
          auto& W = const_cast<at::Tensor&>(out->get(x + name));
          W.copy_(W.to(at::kFloat) + d);
        };
        if (parameter == "mlp.experts.down_proj") {
          add("down_proj.weight", delta);
        } else {
          add("gate_proj.weight", delta.narrow(0, 0, I));
          add("up_proj.weight", delta.narrow(0, I, I));
        }
      }
    }
  }
  return out;
}

at::Tensor lora_delta(const lora_view& v, int64_t layer, const std::string& module_path,
                      const at::Tensor& x) {
  if (!v) return at::Tensor();
  const auto a_name = lora_tensor_name(layer, module_path, 'A');
  if (!v.adapters->contains(a_name)) return at::Tensor();
  const auto& A = v.adapters->get(a_name);
  const auto& B = v.adapters->get(lora_tensor_name(layer, module_path, 'B'));
  at::Tensor in = x;
  const double p = v.config->dropout;
  if (v.dropout && p > 0) {
    // A mask per (seed, layer, module), drawn on the host: the same on every call.
    uint64_t s = v.dropout_seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(layer) * 1000003u;
    for (char ch : module_path) s = s * 131 + static_cast<unsigned char>(ch);
    auto gen = at::make_generator<at::CPUGeneratorImpl>(s);
    auto keep = at::empty(x.sizes(), at::kFloat).bernoulli_(1.0 - p, gen);
    in = x * (keep / (1.0 - p)).to(x.scalar_type()).to(x.device());
  }
  return row_ops::linear_rows(row_ops::linear_rows(in, A), B) * v.config->scale();
}

at::Tensor lora_expert_delta(const lora_view& v, int64_t layer, const std::string& parameter,
                             int64_t expert, const at::Tensor& x) {
  if (!v || !targets(v.config->target_parameters, parameter)) return at::Tensor();
  const int64_t r = v.config->rank;
  const auto& A = v.adapters->get(lora_expert_tensor_name(layer, parameter, *v.config, 'A'));
  const auto& B = v.adapters->get(lora_expert_tensor_name(layer, parameter, *v.config, 'B'));
  const int64_t E = B.size(1) / r;
  // peft's reshapes: A (E, r, in) by rows, B (out, r, E) by columns.
  auto a = A.narrow(0, expert * r, r);
  auto b = B.view({B.size(0), r, E}).select(2, expert).contiguous();
  return row_ops::linear_rows(row_ops::linear_rows(x, a), b) * v.config->scale();
}

}  // namespace milesrt::llm
