#pragma once
/// The serving forward's paged parts on the GPU (forward.cpp's decoder::forward calls them): a
/// step's metadata in one host-to-device copy, attention through the paged kernels
/// (kernels/attention), and the fused bf16 serving forward of dense models (kernels/decoder).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "actors/lib/llm/model.hpp"

namespace milesrt::llm::paged {

/// The paged step of `segments` (each with a block table): token ids and positions (padded to
/// `ids.size()` rows), their cache slots and FlashInfer's CSR arrays sent in one copy, and the
/// attention planned for the batch (decode when every segment has one new token, else prefill).
paged_step make_paged_step(const std::vector<segment>& segments, const std::vector<int64_t>& ids,
                           const std::vector<int64_t>& positions, kv_cache& cache,
                           const model_config& c);

/// One layer's attention over the paged cache: writes the new tokens' K/V into their slots, then
/// the kernel: FlashInfer's, or with `invariant` the batch-invariant one of the true on-policy mode
/// (invariant_ops.hpp: a row's result does not depend on the rest of the step). q [T, heads, d]
/// -> [T, heads, d].
at::Tensor paged_attend(const paged_step& b, kv_cache& cache, int64_t layer, const at::Tensor& q,
                        const at::Tensor& k, const at::Tensor& v, const model_config& c,
                        bool invariant);

/// Whether a MoE layer runs its experts as grouped GEMMs on the device: bf16 on CUDA without
/// autograd (serving, scoring), the expert weights laid out as the grouped GEMM needs them.
bool grouped_experts(const at::Tensor& x, const flat_params& P, const std::string& p,
                     const model_config& c);
/// A MoE layer's experts over x [T, hidden] with routing `chosen` [T, k] and `weights` [T, k] as
/// two grouped GEMMs, each token's k outputs summed in slot order, nothing sent to the host.
at::Tensor moe_grouped(const at::Tensor& x, const at::Tensor& weights, const at::Tensor& chosen,
                       const flat_params& P, const std::string& p, const model_config& c);

/// Whether the serving forward uses the fused bf16 kernels (kernels/decoder): dense layers,
/// head_dim 128, bf16 on the GPU.
bool fused_serving(const model_config& c, at::ScalarType dtype);

/// The serving forward over a paged step with the fused kernels, from the embeddings `h` [T,
/// hidden]; returns the final-norm hidden states [T, hidden]. `invariant` (the true on-policy
/// mode): the batch-invariant GEMMs and attention (invariant_ops.hpp) in place of cuBLAS's and
/// FlashInfer's; every other kernel does the training forward's arithmetic in the same order, so
/// a row's numbers are the training forward's bit for bit.
at::Tensor fused_forward(const flat_params& P, const model_config& c, const paged_step& b,
                         kv_cache& cache, at::Tensor h,
                         const std::pair<at::Tensor, at::Tensor>& rope, bool invariant);

}  // namespace milesrt::llm::paged
