#pragma once
/// Sampling a batch of rows on the GPU in one go (kernels/sampling): the logits of the rows that
/// sample this step in one GEMM, a top-k/top-p threshold for the rows that ask for one, the
/// Gumbel-max sampler, and one small copy of ids, log-probs (and entropies) to the host.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "actors/lib/llm/model.hpp"

namespace milesrt::serving {

struct device_sample_request {
  int64_t row = 0;  ///< row of the hidden states
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = 0;
  uint64_t seed = 0;     ///< the sequence's stream (request seed and sample index)
  int64_t position = 0;  ///< the position of the token being sampled
};

struct device_sample_result {
  int64_t token = 0;
  float logprob = 0;  ///< at the temperature, over the full vocabulary
  float entropy = 0;  ///< of that distribution (when asked)
  /// MoE models, from a CUDA-graph decode step: the input token's routed experts, layer by layer
  /// (top-k each), as the engine records them.
  std::vector<int64_t> experts;
};

/// Samples one token for each request from `model`'s head over hidden [rows, d].
std::vector<device_sample_result> sample_on_device(
    const llm::decoder& model, const at::Tensor& hidden,
    const std::vector<device_sample_request>& requests, bool entropy);

/// The device part alone, for rows of hidden states [S, d] with per-row inputs on the device
/// (temperature float, seeds and positions int64, min_kept float or undefined): writes token [S]
/// int64 and result [2S] float (log-probs, then entropies). No host memory, no synchronisation:
/// it can be captured in a CUDA graph.
void sample_rows_device(const llm::decoder& model, const at::Tensor& hidden,
                        const at::Tensor& temperature, const at::Tensor& seeds,
                        const at::Tensor& positions, const at::Tensor& min_kept, at::Tensor& token,
                        at::Tensor& result);

/// The random stream of sample `index` of a request seeded `seed` (a SplitMix64 hash of both).
uint64_t sample_stream(uint64_t seed, int64_t index);

}  // namespace milesrt::serving
