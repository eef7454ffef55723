#pragma once
/// The serving forward's paged KV cache (decoder::make_cache makes one, kv_cache.cpp) and the
/// prepared steps the paged kernels read it with.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace milesrt::kernels {
class paged_attention;
}

namespace milesrt::llm {

/// The paged-KV interface. Per layer, K and V are [num_blocks * block_size, num_kv_heads,
/// head_dim]; token p of a sequence lives in slot block_table[p / block_size] * block_size +
/// p % block_size. The rollout engine owns the allocator that hands out blocks.
struct kv_cache {
  int64_t block_size = 16;
  int64_t num_blocks = 0;
  std::vector<at::Tensor> k, v;
  /// The paged attention kernels' workspaces (CUDA bf16 caches with a compiled head_dim only;
  /// undefined otherwise): device float and int buffers and a page-locked host buffer.
  at::Tensor attention_float_ws, attention_int_ws, attention_pinned_ws;
  /// True when the forward reads this cache through the paged attention kernels.
  bool paged_kernels() const { return attention_int_ws.defined(); }
};

/// A serving step whose inputs are already on the device, for the paged kernels (the CUDA-graph
/// runner fills such a step's buffers in place before each replay). T new tokens of `sequences`
/// sequences; FlashInfer's CSR arrays describe each sequence's pages (kernels/attention).
struct paged_step {
  at::Tensor ids, positions, slots;                      ///< [T] int64: token, position, cache row
  at::Tensor qo_indptr, kv_indptr, kv_indices, kv_last;  ///< int32
  /// int32 [T]: each row's position and its sequence (the batch-invariant attention's; seq32 is
  /// undefined where row r is sequence r, a decode step)
  at::Tensor positions32, seq32;
  int64_t sequences = 0;
  bool decode_only = false;  ///< one token per sequence (the decode kernel, else prefill)
  std::shared_ptr<kernels::paged_attention> attention;  ///< planned for this batch
};

/// The cache slots [int64, on `device`] of positions [from, to) of a sequence with `table`.
at::Tensor cache_slots(const std::vector<int32_t>& table, int64_t block_size, int64_t from,
                       int64_t to, at::Device device);

}  // namespace milesrt::llm
