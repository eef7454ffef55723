#pragma once
/// The engine's sampler: the next token of each sequence that samples in a step, with its log-prob
/// at the sampling temperature over the full vocabulary (and its distribution's entropy when
/// asked). On a GPU the step's rows sample in one batch (device_sampling.hpp); on the CPU each
/// sequence draws from its own mt19937_64 by inverse CDF over the sorted distribution.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "actors/lib/llm/model.hpp"
#include "actors/lib/serving/device_sampling.hpp"
#include "actors/lib/serving/sequence.hpp"

namespace milesrt::serving {

class sampler {
 public:
  explicit sampler(const llm::decoder& model) : model_(model) {}
  /// One token for each entry of `plan` that samples, in plan order, from the last of its rows
  /// of `hidden` (the step's packed hidden states): on the model's device (CUDA) in one batch, or
  /// on the host.
  std::vector<device_sample_result> sample(const step_plan& plan, const at::Tensor& hidden) const;

 private:
  std::vector<device_sample_result> sample_on_device(const step_plan& plan,
                                                     const at::Tensor& hidden) const;
  std::vector<device_sample_result> sample_on_host(const step_plan& plan,
                                                   const at::Tensor& hidden) const;
  /// Draws from `s`'s stream over hidden row `row` (top-k, then top-p); writes the distribution's
  /// entropy to `entropy` when given.
  int64_t draw(sequence& s, const at::Tensor& row, float* entropy) const;

  const llm::decoder& model_;
};

}  // namespace milesrt::serving
