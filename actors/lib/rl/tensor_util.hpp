#pragma once
/// Small helpers the RL losses and estimators share: the math dtype, argument checks, and host
/// copies for the per-sample and per-token bookkeeping that runs on the CPU.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace milesrt::rl {

/// fp64 stays fp64; everything else computes in fp32.
at::ScalarType math_type(const at::Tensor& t);

/// A host copy as contiguous doubles.
std::vector<double> host_doubles(const at::Tensor& t);

/// A 1-D tensor of `v` on `device` in `type`.
at::Tensor from_host(const std::vector<double>& v, const at::Device& device, at::ScalarType type);

/// Checks that `t` is defined and has shape [n]; c10::Error naming `fn` and `name` otherwise.
void check_1d(const at::Tensor& t, const char* name, int64_t n, const char* fn);

}  // namespace milesrt::rl
