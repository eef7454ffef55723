#pragma once
/// The rollout engine: continuous batching over the LLM core's paged forward, with a per-step token
/// budget and chunked prefill, the paged-KV allocator with preemption, a radix prefix cache, and
/// sampling that records the exact tokens, their log-probs and weight versions.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "actors/lib/llm/model.hpp"
#include "actors/lib/serving/decode_graphs.hpp"
#include "actors/lib/serving/kv_blocks.hpp"

namespace milesrt::serving {

/// Bounds of one request (docs/limits.md, "Sampling"): engine::add refuses what is outside them,
/// `milesrt generate` checks each line's fields and the rollout kind's validation its params.
struct request_limits {
  static constexpr int64_t max_n = 4096;                  ///< samples of one prompt
  static constexpr int64_t max_new_tokens = 1 << 20;      ///< tokens one sample may add
  static constexpr double min_temperature = 1e-5;         ///< below: logits / T overflow
  static constexpr double max_temperature = 1e5;          ///<
  static constexpr int64_t max_top_k = int64_t{1} << 31;  ///<
};

struct sampling_params {
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = 0;  ///< 0: the whole vocabulary
  int64_t max_new_tokens = 16;
  std::vector<int64_t> stop_token_ids;
  std::vector<std::string> stop_strings;  ///< needs engine_config::detokenize
  uint64_t seed = 0;
  int64_t n = 1;                ///< samples of the prompt
  bool return_entropy = false;  ///< also record each sampled token's distribution entropy
};

struct generate_request {
  uint64_t id = 0;
  std::vector<int64_t> prompt;
  sampling_params params;
};

/// One finished sample. logprobs[i] is log p(output[i]) at the sampling temperature over the full
/// vocabulary, before any top-p/top-k renormalization: the number the trainer recomputes.
struct sample {
  uint64_t request_id = 0;
  int64_t index = 0;  ///< 0 .. n-1 within its request
  std::vector<int64_t> prompt;
  std::vector<int64_t> output;
  std::vector<float> logprobs;
  std::vector<uint64_t> versions;  ///< the weight version each output token was sampled under
  std::vector<float> entropies;    ///< per output token, when sampling_params::return_entropy
  /// For MoE models: per token of prompt+output (the last excepted), per MoE layer, top-k experts.
  std::vector<std::vector<int64_t>> experts;
  std::string finish_reason;  ///< "stop", "length" or "abort"
};

/// Sampling: on the CPU each sequence draws from its own mt19937_64 by inverse CDF over the
/// sorted distribution (double precision); on the GPU the whole batch samples in one kernel by
/// Gumbel-max with Philox numbers keyed by (request seed, sample index) and counted by position
/// (kernels/sampling), so a sequence's tokens do not depend on the batch it runs in. Both draw
/// from the same distribution; their samples differ.
struct engine_config {
  int64_t num_blocks = 256;
  int64_t block_size = 16;
  int64_t max_tokens_per_step = 256;  ///< prefill chunks and decode tokens share this budget
  int64_t max_running = 0;            ///< 0: no cap but the KV blocks
  /// Turns output ids into text, for stop strings (null: stop strings are refused).
  std::function<std::string(const std::vector<int64_t>&)> detokenize = nullptr;
  /// On a GPU, > 0: num_blocks is this fraction of the device memory free when the engine starts
  /// (after the weights are loaded), instead of the number above.
  double kv_memory_fraction = 0;
  /// Decode steps on a GPU (dense models with paged kernels, steps without top-k/top-p rows):
  /// captured as CUDA graphs (decode_graphs.hpp), or the same padded steps run eagerly (tests
  /// compare the two), or the plain eager forward.
  enum class graphs { capture, padded_eager, off } decode_graphs = graphs::capture;
  int64_t graph_max_batch = 256;  ///< the largest captured bucket; bigger decode steps run eagerly
  /// With decode graphs: stage the next decode step on the host while the GPU runs this one
  /// (decode_graphs.hpp); sequences that go on then get a KV block for their next token one step
  /// early. Off: each step is staged after the last one's samples are back (tests compare the two).
  bool overlap_host = true;
};

/// num_blocks as `config` asks for `model` (kv_memory_fraction on a GPU); throws when the
/// fraction is outside (0, 1] or leaves no block.
int64_t resolve_num_blocks(const llm::decoder& model, const engine_config& config);

/// What happens to sequences in flight when the weights change.
enum class pause_mode {
  abort,    ///< dropped and reported with finish_reason "abort"
  retract,  ///< requeued with their tokens; their KV is recomputed under the new weights
  in_place  ///< they keep going; their tokens then carry mixed versions
};

struct engine_stats {
  uint64_t prefill_tokens = 0, decode_tokens = 0, steps = 0, preemptions = 0;
  int64_t running = 0, waiting = 0, used_blocks = 0, cached_blocks = 0;
  double prefix_hit_rate = 0;  ///< cached blocks found / whole prompt blocks looked up
};

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
  bool idle() const { return running_.empty() && waiting_.empty(); }
  /// Streaming: the output of request `id`'s first sample past its first `from` tokens, with
  /// their log-probs and versions (finish_reason ""), while it runs or waits; empty otherwise.
  sample output_since(uint64_t id, size_t from) const;
  /// The weights changed to `version` (the caller has updated the model's parameters).
  std::vector<sample> update_weights(uint64_t version, pause_mode mode);
  uint64_t version() const { return version_; }
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
  bool kv_released() const { return kv_released_; }
  engine_stats stats() const;
  const block_allocator& blocks() const { return blocks_; }
  /// The CUDA-graph runner's counters (null without one).
  const decode_graph_stats* graph_stats() const { return graphs_ ? &graphs_->stats() : nullptr; }

 private:
  struct sequence {
    uint64_t request_id = 0;
    int64_t index = 0;
    uint64_t arrival = 0;
    std::vector<int64_t> tokens;  ///< prompt then output
    int64_t prompt_len = 0;
    int64_t computed = 0;  ///< tokens whose KV is in the cache
    std::vector<int32_t> table;
    std::vector<float> logprobs;
    std::vector<uint64_t> versions;
    std::vector<float> entropies;
    std::vector<std::vector<int64_t>> experts;
    sampling_params params;
    std::mt19937_64 rng;
    bool matched = false;  ///< prefix cache consulted since the last (re)start
    int64_t leader = -1;   ///< arrival of the sibling whose prompt prefill it waits for
  };
  /// One step's sequences (pointers into running_, which no longer changes during the step) and
  /// how many of their tokens it computes.
  using step_plan = std::vector<std::pair<sequence*, int64_t>>;
  /// What a step's forward gave: the eager forward's hidden states and MoE routing, the samples
  /// drawn on the device, and whether the step ran as decode graphs.
  struct step_output {
    llm::forward_result fr;
    std::vector<device_sample_result> drawn;
    bool all_decode = false;
  };
  /// Scheduling: the running sequences' chunks within `budget`, oldest first, preempting the
  /// newest when blocks run out; then waiting sequences join while the budget and blocks last.
  std::vector<int64_t> schedule_running(int64_t& budget);
  void admit_waiting(std::vector<int64_t>& chunk, int64_t& budget);
  /// The step's plan, and the segments of its packed forward.
  step_plan schedule(std::vector<llm::segment>& segments);
  /// Execution: the decode graphs when every row is a plain decode row the runner takes, else the
  /// eager forward (and, on the GPU, one batched draw for the rows that sample).
  step_output execute(const step_plan& plan, const std::vector<llm::segment>& segments);
  std::vector<device_sample_result> run_decode_graphs(const step_plan& plan);
  std::vector<device_sample_result> sample_batch_on_device(const step_plan& plan,
                                                           const at::Tensor& hidden);
  /// Advancing: each planned sequence's computed chunk, its next token where its chunk reached the
  /// end; returns the samples that finished (and drops them from running_).
  std::vector<sample> advance(const step_plan& plan, const step_output& out);
  /// Records the computed chunk of plan entry `k`, `n` tokens at packed row `row`: counters, MoE
  /// routing (`experts` of the eager forward, or the decode graphs' own), the prompt blocks a
  /// first sample shares.
  void computed_chunk(sequence& s, int64_t n, int64_t row, const at::Tensor& experts,
                      const step_output& out, size_t k);
  /// Appends the token sampled for `s` (drawn on the device, else from packed row `last_row`);
  /// "stop" or "length" when `s` finished with it, else nullptr.
  const char* take_next_token(sequence& s, const step_output& out, int64_t last_row,
                              size_t& next_draw);
  bool ensure_blocks(sequence& s, int64_t upto);
  void free_sequence(sequence& s, bool cache_blocks);
  void preempt(size_t index);
  int64_t sample_token(sequence& s, const at::Tensor& row, float* entropy);
  sample finish(sequence& s, const std::string& reason);

  const llm::decoder& model_;
  engine_config config_;
  llm::kv_cache cache_;
  block_allocator blocks_;
  radix_cache prefix_;
  std::vector<sequence> running_;
  std::deque<sequence> waiting_;
  uint64_t arrivals_ = 0;
  uint64_t version_ = 0;
  engine_stats stats_;
  std::map<uint64_t, int64_t> prompt_done_;  ///< leader arrival -> whether its prompt is cached
  std::unique_ptr<decode_graphs> graphs_;    ///< decode steps on the GPU (null: eager forward)
  int32_t graph_dummy_block_ = -1;           ///< the block the graphs' padding rows write into
  bool kv_released_ = false;
  decode_graph_stats released_graph_stats_;  ///< the counts of graphs dropped with the KV pool
  /// Makes graphs_ over the current cache (when the configuration and the model allow graphs).
  void make_graphs();
};

}  // namespace milesrt::serving
