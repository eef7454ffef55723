#include "actors/lib/serving/engine.hpp"

#include <ATen/core/grad_mode.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace milesrt::serving {

namespace {
engine_config resolved(const llm::decoder& model, engine_config config) {
  config.num_blocks = resolve_num_blocks(model, config);
  return config;
}

/// Refuses a request outside request_limits, the vocabulary or the KV cache.
void check_request(const llm::decoder& model, const engine_config& config,
                   const generate_request& r) {
  const auto where = "request " + std::to_string(r.id) + ": ";
  if (r.prompt.empty()) throw std::invalid_argument(where + "empty prompt");
  for (auto id : r.prompt) {
    if (id < 0 || id >= model.config().vocab_size) {
      throw std::invalid_argument(where + "token id " + std::to_string(id) +
                                  " is outside the vocabulary of " +
                                  std::to_string(model.config().vocab_size));
    }
  }
  using limits = request_limits;
  if (!(r.params.temperature >= limits::min_temperature &&
        r.params.temperature <= limits::max_temperature)) {
    throw std::invalid_argument(where + "temperature must be from 1e-05 to 100000");
  }
  if (!(r.params.top_p > 0 && r.params.top_p <= 1))
    throw std::invalid_argument(where + "top_p must be in (0, 1]");
  if (r.params.top_k < 0 || r.params.top_k > limits::max_top_k)
    throw std::invalid_argument(where + "top_k must be from 0 to " +
                                std::to_string(limits::max_top_k));
  if (r.params.max_new_tokens < 1 || r.params.max_new_tokens > limits::max_new_tokens)
    throw std::invalid_argument(where + "max_new_tokens must be from 1 to " +
                                std::to_string(limits::max_new_tokens));
  if (r.params.n < 1 || r.params.n > limits::max_n)
    throw std::invalid_argument(where + "n must be from 1 to " + std::to_string(limits::max_n));
  if (!r.params.stop_strings.empty() && !config.detokenize) {
    throw std::invalid_argument(where + "stop strings need a tokenizer");
  }
  const int64_t need =
      (int64_t(r.prompt.size()) + r.params.max_new_tokens + config.block_size - 1) /
      config.block_size;
  if (need > config.num_blocks) {
    throw std::invalid_argument(where + "needs up to " + std::to_string(need) +
                                " KV blocks, the cache has " + std::to_string(config.num_blocks));
  }
}

/// Refuses to resume what an abort did not cut off, or a sample whose parts disagree.
void check_resume(const sample& cut, const sampling_params& params) {
  const auto where =
      "request " + std::to_string(cut.request_id) + " (sample " + std::to_string(cut.index) + "): ";
  if (cut.finish_reason != "abort") {
    throw std::invalid_argument(
        where + "only a sample an abort cut off can resume, not one that ended with '" +
        cut.finish_reason + "'");
  }
  const auto out = static_cast<int64_t>(cut.output.size());
  if (cut.logprobs.size() != cut.output.size() || cut.versions.size() != cut.output.size() ||
      out >= params.max_new_tokens) {
    throw std::invalid_argument(where + "inconsistent: " + std::to_string(out) + " tokens, " +
                                std::to_string(cut.logprobs.size()) + " log-probs, " +
                                std::to_string(cut.versions.size()) + " versions, at most " +
                                std::to_string(params.max_new_tokens) + " new tokens");
  }
}
}  // namespace

engine::engine(const llm::decoder& model, engine_config config)
    : model_(model),
      config_(resolved(model, std::move(config))),
      scheduler_(config_),
      runner_(model_, config_, scheduler_),
      pause_(scheduler_, runner_) {}

void engine::add(const generate_request& r) {
  check_request(model_, config_, r);
  scheduler_.add(r);
}

void engine::resume(const sample& cut, const sampling_params& params) {
  check_resume(cut, params);
  scheduler_.resume(cut, params);
}

std::vector<sample> engine::step() {
  pause_.check_can_step();
  // The model may share a trainer's parameters, which require grad: build no autograd graph.
  at::NoGradGuard no_grad;
  std::vector<llm::segment> segments;
  const step_plan plan = scheduler_.schedule(segments);
  if (plan.empty()) {
    if (scheduler_.stuck()) {
      throw std::runtime_error("rollout engine: no waiting sequence fits into the free KV blocks");
    }
    return {};
  }
  const step_output out = runner_.execute(plan, segments);
  steps_++;
  return scheduler_.update(plan, out, pause_.version());
}

std::vector<sample> engine::run() {
  std::vector<sample> all;
  while (!idle()) {
    auto done = step();
    all.insert(all.end(), done.begin(), done.end());
  }
  return all;
}

sample engine::output_since(uint64_t id, size_t from) const {
  return scheduler_.output_since(id, from);
}

std::vector<sample> engine::update_weights(uint64_t version, pause_mode mode) {
  return pause_.update_weights(version, mode);
}

std::vector<sample> engine::release_kv(pause_mode mode) { return pause_.release_kv(mode); }

void engine::retake_kv() { pause_.retake_kv(); }

engine_stats engine::stats() const {
  engine_stats s = scheduler_.stats();
  s.steps = steps_;
  return s;
}

}  // namespace milesrt::serving
