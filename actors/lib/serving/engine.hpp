#pragma once
/// The rollout engine: continuous batching over the LLM core's paged forward, with a per-step token
/// budget and chunked prefill, the paged-KV allocator with preemption, a radix prefix cache, and
/// sampling that records the exact tokens, their log-probs and weight versions.
///
/// Its parts, as vLLM splits an engine: the scheduler (admission, batching, preemption, the KV
/// blocks and prefix cache: scheduler.hpp), the model runner (a step on the model, eager or as
/// decode graphs: model_runner.hpp), the sampler (sampler.hpp) and the pause controller (weight
/// updates and the KV pool given back: pause_controller.hpp). The values it takes and returns are
/// in engine_types.hpp.

#include <cstdint>

#include "actors/lib/llm/model.hpp"
#include "actors/lib/serving/decode_graphs.hpp"
#include "actors/lib/serving/engine_types.hpp"
#include "actors/lib/serving/kv_blocks.hpp"
#include "actors/lib/serving/model_runner.hpp"
#include "actors/lib/serving/pause_controller.hpp"
#include "actors/lib/serving/scheduler.hpp"

namespace milesrt::serving {

class engine {
 public:
  engine(const llm::decoder& model, engine_config config);

  void add(const generate_request& r);
  /// Continues `cut`, a sample an abort cut off (partial rollout), as request `cut.request_id`
  /// with `params` (those it was added with): its tokens so far are kept with their log-probs and
  /// versions, their KV is computed again under the current weights, and its own random stream goes
  /// on where it stopped, so that new tokens carry the current version.
  void resume(const sample& cut, const sampling_params& params);
  /// One scheduling step: a batch of prefill chunks and decode tokens, one packed forward,
  /// sampling. Returns the samples that finished in it.
  std::vector<sample> step();
  /// Steps until every request has finished.
  std::vector<sample> run();
  bool idle() const { return scheduler_.idle(); }
  /// Streaming: the output of request `id`'s first sample past its first `from` tokens, with
  /// their log-probs and versions (finish_reason ""), while it runs or waits; empty otherwise.
  sample output_since(uint64_t id, size_t from) const;
  /// The weights changed to `version` (the caller has updated the model's parameters).
  std::vector<sample> update_weights(uint64_t version, pause_mode mode);
  uint64_t version() const { return pause_.version(); }
  /// Colocated training: gives the KV pool's memory back (the cache tensors, the attention
  /// workspaces and the captured decode graphs, which point into them) so that a trainer in the
  /// same process can use it; the engine keeps its allocator, queue and configuration. Sequences in
  /// flight are aborted (returned with finish_reason "abort") or retracted (requeued with their
  /// tokens, recomputed after retake_kv; `in_place` retracts too: their KV is gone). step() refuses
  /// while released; add() queues.
  std::vector<sample> release_kv(pause_mode mode);
  /// Allocates the pool again (the same number of blocks); the decode graphs are captured again
  /// on their first use.
  void retake_kv();
  bool kv_released() const { return pause_.kv_released(); }
  engine_stats stats() const;
  const block_allocator& blocks() const { return scheduler_.blocks(); }
  /// The CUDA-graph runner's counters (null without one).
  const decode_graph_stats* graph_stats() const { return runner_.graph_stats(); }

 private:
  const llm::decoder& model_;
  engine_config config_;
  scheduler scheduler_;
  model_runner runner_;
  pause_controller pause_;
  uint64_t steps_ = 0;
};

}  // namespace milesrt::serving
