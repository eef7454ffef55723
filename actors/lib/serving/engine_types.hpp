#pragma once
/// The rollout engine's values: a request and its sampling parameters, the samples it returns, the
/// engine's configuration, what a weight update does to sequences in flight, and the counters.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

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

}  // namespace milesrt::serving
