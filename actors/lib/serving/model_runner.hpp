#pragma once
/// The engine's model runner: owns the paged KV pool and the decode graphs over it, and runs a
/// scheduled step on the model: as CUDA graphs when every row is a plain decode row the graphs
/// take, else the packed eager forward, whose sampling rows go to the sampler.

#include <cstdint>
#include <memory>
#include <vector>

#include "actors/lib/llm/model.hpp"
#include "actors/lib/serving/decode_graphs.hpp"
#include "actors/lib/serving/engine_types.hpp"
#include "actors/lib/serving/sampler.hpp"
#include "actors/lib/serving/scheduler.hpp"
#include "actors/lib/serving/sequence.hpp"

namespace milesrt::serving {

/// num_blocks as `config` asks for `model` (kv_memory_fraction on a GPU); throws when the
/// fraction is outside (0, 1] or leaves no block.
int64_t resolve_num_blocks(const llm::decoder& model, const engine_config& config);

class model_runner {
 public:
  /// `config.num_blocks` is the resolved number of KV blocks; the graphs' padding block comes from
  /// `sched`'s allocator, and with overlap_host `sched` reserves the blocks of the step staged
  /// ahead.
  model_runner(const llm::decoder& model, const engine_config& config, scheduler& sched);
  /// Runs the step `plan` (whose packed forward is `segments`) and samples its sampling rows.
  step_output execute(const step_plan& plan, const std::vector<llm::segment>& segments);
  /// Drops the KV pool, its attention workspaces and the decode graphs (which point into them).
  void release_kv();
  /// Allocates the pool again (the same number of blocks); the graphs are captured again on use.
  void retake_kv();
  /// The decode graphs' counters (null without graphs).
  const decode_graph_stats* graph_stats() const { return graphs_ ? &graphs_->stats() : nullptr; }

 private:
  /// Makes graphs_ over the current cache (when the configuration and the model allow graphs).
  void make_graphs();
  /// The decode step `plan` as graphs, with the step expected next staged behind it
  /// (engine_config::overlap_host).
  std::vector<device_sample_result> run_decode_graphs(const step_plan& plan);

  const llm::decoder& model_;
  engine_config config_;
  scheduler& scheduler_;
  sampler sampler_;
  llm::kv_cache cache_;
  std::unique_ptr<decode_graphs> graphs_;    ///< decode steps on the GPU (null: eager forward)
  int32_t graph_dummy_block_ = -1;           ///< the block the graphs' padding rows write into
  decode_graph_stats released_graph_stats_;  ///< the counts of graphs dropped with the KV pool
};

}  // namespace milesrt::serving
