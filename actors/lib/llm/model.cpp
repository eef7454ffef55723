// The decoder: its parameters and settings, and the LoRA adapter it applies. The rest of the model
// lives by job: model_files.cpp (load and save), forward.cpp and forward_moe.cpp (the forward
// pass, activation checkpointing, mixtures of experts), kv_cache.cpp (the paged KV cache) and
// scores.cpp (log-probs over the vocabulary).
#include "actors/lib/llm/model.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <stdexcept>
#include <utility>

#include "actors/lib/llm/invariant_ops.hpp"

namespace milesrt::llm {
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

}  // namespace

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
    const auto why = invariant_ops::problem(device_, dtype_, adapter_ != nullptr, config_.head_dim);
    if (!why.empty()) throw std::invalid_argument("trueOnPolicy: " + why);
  }
  batch_invariant_ = on;
}

const at::Tensor& decoder::lm_head() const {
  return config_.tie_word_embeddings ? params_->get("model.embed_tokens.weight")
                                     : params_->get("lm_head.weight");
}

// -- the LoRA adapter ---------------------------------------------------------------------------

void decoder::set_adapters(std::shared_ptr<flat_params> adapters, lora_config c) {
  if (!adapters) throw std::invalid_argument("set_adapters: no adapters");
  if (batch_invariant_) {
    if (auto why = invariant_ops::problem(device_, dtype_, true); !why.empty())
      throw std::invalid_argument("trueOnPolicy: " + why);
  }
  auto next =
      std::make_unique<lora_adapter>(std::move(adapters), std::move(c), config_, dtype_, device_);
  if (adapter_) next->set_merge_base(adapter_->merge_base());  // a merged model stays merged
  adapter_ = std::move(next);
}

void decoder::clear_adapters() { adapter_.reset(); }

void decoder::serve_merged(std::shared_ptr<const flat_params> base) {
  if (!adapter_) throw std::invalid_argument("serve_merged: the model has no adapters");
  if (!base || base->names() != params_->names() || base->shapes() != params_->shapes())
    throw std::invalid_argument("serve_merged: the base does not have this model's parameters");
  adapter_->set_merge_base(std::move(base));
  refresh_merged();
}

void decoder::refresh_merged() {
  if (!adapter_ || !adapter_->merged()) return;
  at::NoGradGuard no_grad;
  auto merged = adapter_->merge(config_);
  params_->buffer().detach().copy_(merged->buffer());
}

void decoder::set_published(std::shared_ptr<flat_params> p) {
  if (adapter_) {
    set_adapters(std::move(p), adapter_->config());
  } else {
    set_params(std::move(p));
  }
}

}  // namespace milesrt::llm
