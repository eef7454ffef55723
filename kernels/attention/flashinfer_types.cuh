#pragma once
// The FlashInfer types milesrt instantiates (one set: bf16, int32 indices, head_dim 128, no RoPE
// inside the kernel, no custom mask / sliding window / soft-cap / ALiBi). Shared by the .cu files.
#include <cuda_bf16.h>

#include <flashinfer/attention/default_decode_params.cuh>
#include <flashinfer/attention/default_prefill_params.cuh>
#include <flashinfer/attention/mask.cuh>
#include <flashinfer/attention/variants.cuh>
#include <flashinfer/page.cuh>
#include <string>

#include "kernels/attention/paged_attention.hpp"

namespace milesrt::kernels::fi_types {
using bf16 = nv_bfloat16;
using variant = flashinfer::DefaultAttention</*custom_mask=*/false, /*sliding_window=*/false,
                                             /*logits_soft_cap=*/false, /*alibi=*/false>;
using decode_params = flashinfer::BatchDecodeParams<bf16, bf16, bf16, int32_t>;
using prefill_params = flashinfer::BatchPrefillPagedParams<bf16, bf16, bf16, int32_t>;
constexpr unsigned kHeadDim = 128;

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw attention_error(std::string(what) + ": " + cudaGetErrorString(e));
}

/// The shapes the compiled kernels take: head_dim 128, query heads a multiple of the kv heads.
inline void check_shape(int head_dim, int qo_heads, int kv_heads) {
  if (head_dim != int(kHeadDim))
    throw attention_error("paged attention: head_dim " + std::to_string(head_dim) +
                          " is not compiled (128 is)");
  if (kv_heads <= 0 || qo_heads % kv_heads != 0)
    throw attention_error("paged attention: " + std::to_string(qo_heads) + " query heads over " +
                          std::to_string(kv_heads) + " kv heads");
}

/// milesrt's cache (NHD: [pages * page_size, kv_heads, head_dim]) as FlashInfer's paged_kv_t.
inline flashinfer::paged_kv_t<bf16, int32_t> paged_kv(const paged_kv_desc& kv, int batch) {
  return flashinfer::paged_kv_t<bf16, int32_t>(
      uint32_t(kv.kv_heads), uint32_t(kv.page_size), uint32_t(kv.head_dim), uint32_t(batch),
      flashinfer::QKVLayout::kNHD, static_cast<bf16*>(kv.k), static_cast<bf16*>(kv.v),
      const_cast<int32_t*>(kv.indices), const_cast<int32_t*>(kv.indptr),
      const_cast<int32_t*>(kv.last_page_len));
}
}  // namespace milesrt::kernels::fi_types

namespace flashinfer {
// Defined (instantiated) in paged_prefill_cta*.cu, one CTA_TILE_Q per file so that they compile
// in parallel; the dispatcher in paged_prefill.cu only declares it.
template <bool SAME_KV_STRIDES, uint32_t CTA_TILE_Q, uint32_t HEAD_DIM_QK, uint32_t HEAD_DIM_VO,
          PosEncodingMode POS_ENCODING_MODE, bool USE_FP16_QK_REDUCTION, MaskMode MASK_MODE,
          bool USE_TOKEN_HEAD_SF, typename AttentionVariant, typename Params>
cudaError_t BatchPrefillWithPagedKVCacheDispatched(Params params, typename Params::DTypeO* tmp_v,
                                                   float* tmp_s, bool enable_pdl,
                                                   cudaStream_t stream);
}  // namespace flashinfer

#define MILESRT_FI_PREFILL_INSTANCE(CTA)                                                           \
  template cudaError_t flashinfer::BatchPrefillWithPagedKVCacheDispatched<                         \
      /*SAME_KV_STRIDES=*/true, CTA, 128, 128, flashinfer::PosEncodingMode::kNone,                 \
      /*fp16_qk_reduction=*/false, flashinfer::MaskMode::kCausal, /*token_head_sf=*/false,         \
      milesrt::kernels::fi_types::variant, milesrt::kernels::fi_types::prefill_params>(            \
      milesrt::kernels::fi_types::prefill_params, milesrt::kernels::fi_types::bf16*, float*, bool, \
      cudaStream_t);
