#pragma once
/// Decode steps as CUDA graphs. A decode step (one new token for each of n sequences) is the same
/// kernels over the same buffers whatever the tokens: captured once per bucket size B (1, 2, 4, 8,
/// then every multiple of 8 up to max_batch) and replayed with the step's inputs written into
/// static device buffers first: token ids, positions, cache slots, FlashInfer's page tables (the
/// plan runs on the host before each replay) and the sampler's seeds and temperatures. The graph
/// holds the whole step: the model's forward over the paged cache, the head GEMM and the sampler,
/// whose outputs land in static buffers read back with one copy. Rows past n (up to B) are
/// padding: token 0 at position 0 writing to a reserved dummy block that no sequence owns.
///
/// Addresses the graphs bake in: the KV cache (allocated once), the static buffers, and the
/// model's parameter buffer. A new parameter buffer (decoder::set_params) is noticed before the
/// next replay and every graph is captured again; updating the weights in place needs nothing.
/// MoE models are captured too (routing and grouped experts stay on the GPU); each row's routed
/// experts come back with its sample. Steps with top-k/top-p rows and batches above max_batch run
/// eagerly.
///
/// Overlap with the host: run() may be given the step the engine expects next (each of those rows
/// continues a row of this step, one position further, fed the token this step samples). While
/// the GPU runs this step, the host stages that one (metadata, page tables, seeds, FlashInfer's
/// plan) and queues its copies behind it, and the GPU gathers its input tokens from this step's
/// samples, so nothing waits for them on the host. When the next run() asks for exactly those rows
/// (no sequence finished, joined or was preempted) it only replays; otherwise it stages as usual.

#include <cstdint>
#include <memory>
#include <vector>

#include "actors/lib/llm/model.hpp"
#include "actors/lib/serving/device_sampling.hpp"

namespace milesrt::serving {

struct decode_row {
  int64_t token = 0;     ///< the input token
  int64_t position = 0;  ///< its position (the sampled token is at position + 1)
  const std::vector<int32_t>* table = nullptr;
  double temperature = 1.0;
  uint64_t seed = 0;  ///< the sequence's stream
  /// In the rows of the step expected next (run's `next`): the row of this step whose sample is
  /// this row's input token (`token` is then ignored).
  int64_t from = -1;
};

struct decode_graph_stats {
  uint64_t replays = 0, captures = 0, eager = 0;
  /// Steps staged ahead while the previous one ran, and how many of them the engine then asked
  /// for (the others were staged again).
  uint64_t staged_ahead = 0, staged_ahead_used = 0;
  /// Summed over the steps that did not capture: host time preparing a step (metadata, the
  /// attention plan, the copies queued) and GPU time of the step itself (CUDA events around the
  /// replay or the eager run): where a decode step's time goes.
  double host_ms = 0, gpu_ms = 0;
};

class decode_graphs {
 public:
  /// `use_graphs` false runs the same padded steps eagerly (for tests: replay must equal it).
  decode_graphs(const llm::decoder& model, llm::kv_cache& cache, int32_t dummy_block,
                int64_t max_batch, bool use_graphs);
  ~decode_graphs();
  /// Whether decode steps of this model can run here (CUDA with the paged kernels).
  static bool supported(const llm::decoder& model, const llm::kv_cache& cache);
  int64_t max_batch() const { return buckets_.empty() ? 0 : buckets_.back(); }
  /// The bucket a step of n rows runs in (0 when n > max_batch).
  int64_t bucket(int64_t n) const;
  /// One decode step: samples the next token of each row. `next` (optional): the rows of the step
  /// expected after this one, staged while this one runs (each with `from` set; at most max_batch).
  std::vector<device_sample_result> run(const std::vector<decode_row>& rows,
                                        const std::vector<decode_row>* next = nullptr);
  const decode_graph_stats& stats() const { return stats_; }
  /// Counts on from `earlier` (the engine's graphs made again over a retaken KV pool).
  void continue_stats(const decode_graph_stats& earlier) { stats_ = earlier; }

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
  std::vector<int64_t> buckets_;
  decode_graph_stats stats_;
};

}  // namespace milesrt::serving
