#include "actors/lib/serving/model_runner.hpp"

#include <ATen/ATen.h>

#include <cstdio>
#include <stdexcept>
#include <string>

#include "kernels/device.hpp"

namespace milesrt::serving {

namespace {
// Refuses a KV pool larger than the memory of its device (docs/limits.md, "Sampling") before
// allocating it: an allocation that large fails deep inside libtorch, or swaps.
int64_t fitting(const llm::decoder& model, const engine_config& config) {
  size_t free_bytes = 0, total_bytes = 0;
  double memory = llm::physical_memory_bytes();
  const char* what = "the machine's memory";
  if (model.device().is_cuda() &&
      kernels::cuda_memory_info(model.device().index() < 0 ? 0 : model.device().index(), free_bytes,
                                total_bytes)) {
    memory = double(total_bytes);
    what = "the GPU's memory";
  }
  const double bytes = double(config.num_blocks) * double(config.block_size) *
                       double(model.kv_block_bytes(1));  // doubles: no overflow
  if (memory > 0 && bytes > memory) {
    char line[200];
    std::snprintf(line, sizeof line, "%.1f GiB (%lld blocks of %lld tokens) exceeds %s (%.1f GiB)",
                  bytes / double(1ull << 30), static_cast<long long>(config.num_blocks),
                  static_cast<long long>(config.block_size), what, memory / double(1ull << 30));
    throw std::invalid_argument(std::string("the KV cache of ") + line);
  }
  return config.num_blocks;
}
}  // namespace

int64_t resolve_num_blocks(const llm::decoder& model, const engine_config& config) {
  if (config.kv_memory_fraction == 0 || !model.device().is_cuda()) return fitting(model, config);
  if (!(config.kv_memory_fraction > 0 && config.kv_memory_fraction <= 1)) {
    throw std::invalid_argument("kv memory fraction " + std::to_string(config.kv_memory_fraction) +
                                " is not in (0, 1]");
  }
  size_t free_bytes = 0, total_bytes = 0;
  if (!kernels::cuda_memory_info(model.device().index() < 0 ? 0 : model.device().index(),
                                 free_bytes, total_bytes)) {
    throw std::runtime_error("kv memory fraction: cannot read the GPU's free memory");
  }
  // The attention workspaces and the step's activations come out of the same memory: keep 1 GiB.
  const double usable =
      std::max(0.0, double(free_bytes) * config.kv_memory_fraction - double(1ull << 30));
  const int64_t blocks =
      static_cast<int64_t>(usable / double(model.kv_block_bytes(config.block_size)));
  if (blocks < 1) {
    throw std::runtime_error("kv memory fraction " + std::to_string(config.kv_memory_fraction) +
                             " of " + std::to_string(free_bytes >> 20) +
                             " MiB free leaves no KV block");
  }
  return blocks;
}

model_runner::model_runner(const llm::decoder& model, const engine_config& config, scheduler& sched)
    : model_(model),
      config_(config),
      scheduler_(sched),
      sampler_(model),
      cache_(model.make_cache(config_.num_blocks, config_.block_size)) {
  make_graphs();
}

void model_runner::make_graphs() {
  if (config_.decode_graphs == engine_config::graphs::off || config_.graph_max_batch <= 0 ||
      !decode_graphs::supported(model_, cache_)) {
    return;
  }
  if (graph_dummy_block_ < 0) {
    // Padding rows of a bucket write their K/V into a block no sequence owns.
    const auto dummy = scheduler_.blocks().allocate();
    if (!dummy)
      throw std::invalid_argument("rollout engine: no KV block for the CUDA graphs' padding rows");
    graph_dummy_block_ = *dummy;
  }
  graphs_ =
      std::make_unique<decode_graphs>(model_, cache_, graph_dummy_block_, config_.graph_max_batch,
                                      config_.decode_graphs == engine_config::graphs::capture);
}

void model_runner::release_kv() {
  if (graphs_) released_graph_stats_ = graphs_->stats();
  graphs_.reset();  // the graphs hold the cache's addresses
  cache_ = llm::kv_cache{};
}

void model_runner::retake_kv() {
  cache_ = model_.make_cache(config_.num_blocks, config_.block_size);
  make_graphs();
  if (graphs_) graphs_->continue_stats(released_graph_stats_);
}

std::vector<device_sample_result> model_runner::run_decode_graphs(const step_plan& plan) {
  std::vector<decode_row> rows;
  rows.reserve(plan.size());
  for (const auto& [seq, n] : plan) {
    decode_row r;
    r.token = seq->tokens.back();
    r.position = seq->computed;
    r.table = &seq->table;
    r.temperature = seq->params.temperature;
    r.seed = sample_stream(seq->params.seed, seq->index);
    rows.push_back(r);
  }
  // The step expected next, staged while this one runs: every row that may go on, one position
  // further, with a KV block for it.
  std::vector<decode_row> next;
  if (config_.overlap_host) {
    for (const size_t k : scheduler_.reserve_next_decode(plan)) {
      decode_row r = rows[k];
      r.from = static_cast<int64_t>(k);
      r.position = plan[k].first->computed + 1;
      next.push_back(r);
    }
  }
  return graphs_->run(rows, next.empty() ? nullptr : &next);
}

step_output model_runner::execute(const step_plan& plan,
                                  const std::vector<llm::segment>& segments) {
  // On the GPU every sequence that samples this step samples in one batch; a step of decode rows
  // only runs as a CUDA graph when the runner takes it.
  step_output out;
  out.all_decode = graphs_ != nullptr && graphs_->bucket(static_cast<int64_t>(plan.size())) > 0;
  for (const auto& [seq, n] : plan) {
    out.all_decode = out.all_decode && n == 1 &&
                     seq->computed + 1 == static_cast<int64_t>(seq->tokens.size()) &&
                     seq->params.top_k == 0 && seq->params.top_p >= 1.0;
  }
  if (out.all_decode) {
    out.drawn = run_decode_graphs(plan);
    return out;
  }
  const llm::forward_result fr = model_.forward(segments, {&cache_, nullptr});
  out.drawn = sampler_.sample(plan, fr.hidden);
  // MoE routing to the host once per step: [tokens, layers * top_k].
  if (!fr.experts.empty()) out.experts = at::cat(fr.experts, 1).to(at::kCPU).contiguous();
  return out;
}

}  // namespace milesrt::serving
