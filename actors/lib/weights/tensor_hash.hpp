#pragma once
/// Content hashes of weights: a trainer publishes one xxh3-64 per tensor with each version
/// (weights_ref::hashes), and an engine checks what it received against them (verifyWeights).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "actors/lib/llm/model.hpp"

namespace milesrt::weights {

/// Received weights differ from the published hashes; `tensors` names the differing ones.
struct weights_mismatch : std::runtime_error {
  weights_mismatch(const std::string& what, std::vector<std::string> tensors)
      : std::runtime_error(what), tensors(std::move(tensors)) {}
  std::vector<std::string> tensors;
};

/// xxh3-64 of a tensor's bytes (of a contiguous CPU copy), with its dtype and shape mixed in: the
/// same values in another dtype or shape hash differently. Any device.
uint64_t tensor_hash(const at::Tensor& t);

/// The hash of each parameter, in names() order (one device-to-host copy of the whole buffer).
std::vector<uint64_t> param_hashes(const llm::flat_params& p);

/// Throws weights_mismatch naming the first differing tensors (and how many differ) when `p`'s
/// hashes are not `expected` (which must have one entry per parameter).
void verify_weights(const llm::flat_params& p, const std::vector<uint64_t>& expected);

/// The xxh3-64 of `n` bytes (the checksum used by the disk and shared-memory transports).
uint64_t bytes_hash(const void* data, size_t n);

/// A CPU, contiguous tensor holding `t`'s bytes (`t` itself when it already is one).
at::Tensor cpu_contiguous(const at::Tensor& t);

}  // namespace milesrt::weights
