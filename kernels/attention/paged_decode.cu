// Paged decode: FlashInfer's BatchDecodeWithPagedKVCache (plan on the host, run per layer).
#include <flashinfer/attention/decode.cuh>
#include <flashinfer/attention/scheduler.cuh>

#include "kernels/attention/flashinfer_types.cuh"
#include "kernels/attention/paged_attention.hpp"

namespace milesrt::kernels {
using namespace fi_types;
namespace fi = flashinfer;

bool paged_attention_supported(int head_dim) { return head_dim == int(kHeadDim); }

paged_attention::paged_attention(void* float_ws, void* int_ws, void* pinned_ws)
    : float_ws_(float_ws), int_ws_(int_ws), pinned_ws_(pinned_ws) {}

void paged_attention::plan_decode(const int32_t* kv_indptr_host, int batch, int qo_heads,
                                  int kv_heads, int head_dim, int page_size, bool cuda_graph,
                                  void* stream) {
  check_shape(head_dim, qo_heads, kv_heads);
  fi::DecodePlanInfo info;
  const int group = qo_heads / kv_heads;
  cudaError_t status = cudaErrorInvalidValue;
  try {
    DISPATCH_GQA_GROUP_SIZE(group, GROUP_SIZE, {
      auto estimate = fi::BatchDecodeWithPagedKVCacheWorkEstimationDispatched<
          GROUP_SIZE, kHeadDim, fi::PosEncodingMode::kNone, variant, decode_params>;
      status = fi::DecodePlan<kHeadDim, fi::PosEncodingMode::kNone, variant, decode_params>(
          float_ws_, kAttentionFloatWorkspaceBytes, int_ws_, pinned_ws_,
          kAttentionIntWorkspaceBytes, info, const_cast<int32_t*>(kv_indptr_host), uint32_t(batch),
          uint32_t(qo_heads), uint32_t(page_size), cuda_graph, static_cast<cudaStream_t>(stream),
          estimate);
    });
  } catch (const std::exception& e) {  // FlashInfer's error for a GQA group size it lacks
    throw attention_error(std::string("paged decode plan: ") + e.what());
  }
  check(status, "paged decode plan");
  decode_plan_ = info.ToVector();
}

void paged_attention::run_decode(const void* q, void* o, const paged_kv_desc& kv, int batch,
                                 int qo_heads, float sm_scale, void* stream) const {
  if (decode_plan_.empty()) throw attention_error("paged decode: run before plan");
  fi::DecodePlanInfo info;
  info.FromVector(decode_plan_);
  decode_params p;
  p.q = static_cast<bf16*>(const_cast<void*>(q));
  p.paged_kv = paged_kv(kv, batch);
  p.o = static_cast<bf16*>(o);
  p.lse = nullptr;
  p.num_qo_heads = uint32_t(qo_heads);
  p.q_stride_n = qo_heads * kv.head_dim;
  p.q_stride_h = kv.head_dim;
  p.window_left = -1;
  p.logits_soft_cap = 0.f;
  p.sm_scale = sm_scale;
  p.rope_rcp_scale = 1.f;
  p.rope_rcp_theta = 1e-4f;
  p.request_indices = fi::GetPtrFromBaseOffset<int32_t>(int_ws_, info.request_indices_offset);
  p.kv_tile_indices = fi::GetPtrFromBaseOffset<int32_t>(int_ws_, info.kv_tile_indices_offset);
  p.o_indptr = fi::GetPtrFromBaseOffset<int32_t>(int_ws_, info.o_indptr_offset);
  p.kv_chunk_size_ptr = fi::GetPtrFromBaseOffset<int32_t>(int_ws_, info.kv_chunk_size_ptr_offset);
  p.block_valid_mask = nullptr;
  p.partition_kv = false;
  bf16* tmp_v = nullptr;
  float* tmp_s = nullptr;
  if (info.split_kv) {
    tmp_v = fi::GetPtrFromBaseOffset<bf16>(float_ws_, info.v_offset);
    tmp_s = fi::GetPtrFromBaseOffset<float>(float_ws_, info.s_offset);
    if (info.enable_cuda_graph)
      p.block_valid_mask = fi::GetPtrFromBaseOffset<bool>(int_ws_, info.block_valid_mask_offset);
  }
  p.padded_batch_size = uint32_t(info.padded_batch_size);
  check(fi::BatchDecodeWithPagedKVCacheDispatched<kHeadDim, fi::PosEncodingMode::kNone, variant>(
            p, tmp_v, tmp_s, /*enable_pdl=*/false, static_cast<cudaStream_t>(stream)),
        "paged decode");
}

}  // namespace milesrt::kernels
