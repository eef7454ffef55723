#pragma once
/// What the engine's parts pass each other: a sequence (one sample of a request) with its tokens,
/// blocks and random stream, a step's plan (the scheduler's), and the step's output (the model
/// runner's).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "actors/lib/serving/device_sampling.hpp"
#include "actors/lib/serving/engine_types.hpp"

namespace milesrt::serving {

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

/// One step's sequences (pointers into the scheduler's running sequences, which no longer change
/// during the step) and how many of their tokens it computes.
using step_plan = std::vector<std::pair<sequence*, int64_t>>;

/// Whether plan entry (s, n) reaches the end of its sequence's tokens, so that it samples.
inline bool samples(const sequence& s, int64_t n) {
  return s.computed + n == static_cast<int64_t>(s.tokens.size());
}

/// What a step's forward gave: one drawn token for each plan entry that samples (in plan order),
/// the eager forward's MoE routing on the host ([tokens, layers * top_k], undefined without), and
/// whether the step ran as decode graphs (each drawn token then carries its row's routing).
struct step_output {
  std::vector<device_sample_result> drawn;
  at::Tensor experts;
  bool all_decode = false;
};

/// The sample `s` is so far, ended for `reason`.
sample to_sample(const sequence& s, const std::string& reason);

}  // namespace milesrt::serving
