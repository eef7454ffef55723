#include "actors/lib/llm/kv_cache.hpp"

#include <ATen/ATen.h>

#include "actors/lib/llm/model.hpp"
#include "kernels/attention/paged_attention.hpp"

namespace milesrt::llm {

int64_t decoder::kv_block_bytes(int64_t block_size) const {
  return 2 * config_.num_layers * block_size * config_.num_kv_heads * config_.head_dim *
         static_cast<int64_t>(c10::elementSize(dtype_));
}

namespace {
/// Whether the serving forward on this device reads the cache through the paged kernels.
bool use_paged_kernels(at::Device device, at::ScalarType dtype, const model_config& c) {
  return device.is_cuda() && dtype == at::kBFloat16 &&
         kernels::paged_attention_supported(static_cast<int>(c.head_dim));
}
}  // namespace

kv_cache decoder::make_cache(int64_t num_blocks, int64_t block_size) const {
  kv_cache c;
  c.block_size = block_size;
  c.num_blocks = num_blocks;
  auto opts = at::TensorOptions().dtype(dtype_).device(device_);
  for (int64_t i = 0; i < config_.num_layers; ++i) {
    c.k.push_back(
        at::zeros({num_blocks * block_size, config_.num_kv_heads, config_.head_dim}, opts));
    c.v.push_back(
        at::zeros({num_blocks * block_size, config_.num_kv_heads, config_.head_dim}, opts));
  }
  if (use_paged_kernels(device_, dtype_, config_)) {
    auto bytes = at::TensorOptions().dtype(at::kByte);
    c.attention_float_ws =
        at::empty({int64_t(kernels::kAttentionFloatWorkspaceBytes)}, bytes.device(device_));
    c.attention_int_ws =
        at::empty({int64_t(kernels::kAttentionIntWorkspaceBytes)}, bytes.device(device_));
    c.attention_pinned_ws =
        at::empty({int64_t(kernels::kAttentionIntWorkspaceBytes)}, bytes.pinned_memory(true));
  }
  return c;
}

at::Tensor cache_slots(const std::vector<int32_t>& table, int64_t block_size, int64_t from,
                       int64_t to, at::Device device) {
  std::vector<int64_t> s;
  s.reserve(to - from);
  for (int64_t p = from; p < to; ++p) {
    int64_t block = p / block_size;
    TORCH_CHECK(block < static_cast<int64_t>(table.size()), "block table of ", table.size(),
                " blocks is too short for position ", p);
    s.push_back(int64_t(table[block]) * block_size + p % block_size);
  }
  return at::tensor(s, at::kLong).to(device);
}

}  // namespace milesrt::llm
