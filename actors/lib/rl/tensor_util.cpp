#include "actors/lib/rl/tensor_util.hpp"

#include <ATen/ATen.h>

namespace milesrt::rl {

at::ScalarType math_type(const at::Tensor& t) {
  return t.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

std::vector<double> host_doubles(const at::Tensor& t) {
  auto c = t.detach().to(at::kCPU, at::kDouble).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

at::Tensor from_host(const std::vector<double>& v, const at::Device& device, at::ScalarType type) {
  return at::tensor(at::ArrayRef<double>(v), at::TensorOptions().dtype(at::kDouble))
      .to(device, type);
}

void check_1d(const at::Tensor& t, const char* name, int64_t n, const char* fn) {
  TORCH_CHECK(t.defined(), fn, ": ", name, " is required");
  TORCH_CHECK(t.dim() == 1 && t.size(0) == n, fn, ": ", name, " must be [", n, "], got ",
              t.sizes());
}

}  // namespace milesrt::rl
