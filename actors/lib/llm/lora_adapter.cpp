#include "actors/lib/llm/lora_adapter.hpp"

#include <stdexcept>
#include <utility>

namespace milesrt::llm {

lora_adapter::lora_adapter(std::shared_ptr<flat_params> weights, lora_config config,
                           const model_config& m, at::ScalarType dtype, at::Device device) {
  const auto specs = lora_parameter_specs(m, config);
  const auto& names = weights->names();
  const auto& shapes = weights->shapes();
  if (names.size() != specs.size()) {
    throw std::invalid_argument("LoRA adapters: " + std::to_string(names.size()) +
                                " tensors, the settings need " + std::to_string(specs.size()));
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    if (names[i] != specs[i].first || shapes[i] != specs[i].second) {
      throw std::invalid_argument("LoRA adapters: tensor " + std::to_string(i) + " is '" +
                                  names[i] + "', the settings need '" + specs[i].first +
                                  "' of rank " + std::to_string(config.rank));
    }
  }
  const auto& b = weights->buffer();
  if (b.scalar_type() != dtype || b.device() != device) {
    throw std::invalid_argument("LoRA adapters: another dtype or device than the model's");
  }
  weights_ = std::move(weights);
  config_ = std::move(config);
}

std::shared_ptr<flat_params> lora_adapter::merge(const model_config& m) const {
  return merge_adapters(*merge_base_, m, config_, *weights_);
}

}  // namespace milesrt::llm
