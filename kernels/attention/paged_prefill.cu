// Paged prefill: FlashInfer's BatchPrefillWithPagedKVCache (plan on the host, run per layer); the
// kernels themselves are instantiated in paged_prefill_cta{16,64,128}.cu.
#include <flashinfer/attention/scheduler.cuh>

#include "kernels/attention/flashinfer_types.cuh"
#include "kernels/attention/paged_attention.hpp"

namespace milesrt::kernels {
using namespace fi_types;
namespace fi = flashinfer;

namespace {
template <uint32_t CTA>
cudaError_t launch(const prefill_params& p, bf16* tmp_v, float* tmp_s, cudaStream_t stream) {
  return fi::BatchPrefillWithPagedKVCacheDispatched<
      true, CTA, kHeadDim, kHeadDim, fi::PosEncodingMode::kNone, false, fi::MaskMode::kCausal,
      false, variant, prefill_params>(p, tmp_v, tmp_s, false, stream);
}
}  // namespace

void paged_attention::plan_prefill(const int32_t* qo_indptr_host, const int32_t* kv_indptr_host,
                                   int batch, int qo_heads, int kv_heads, int head_dim,
                                   int page_size, void* stream) {
  check_shape(head_dim, qo_heads, kv_heads);
  fi::PrefillPlanInfo info;
  const uint32_t rows = uint32_t(qo_indptr_host[batch]);
  check(fi::PrefillPlan<int32_t>(float_ws_, kAttentionFloatWorkspaceBytes, int_ws_, pinned_ws_,
                                 kAttentionIntWorkspaceBytes, info,
                                 const_cast<int32_t*>(qo_indptr_host),
                                 const_cast<int32_t*>(kv_indptr_host), rows, uint32_t(batch),
                                 uint32_t(qo_heads), uint32_t(kv_heads), kHeadDim, kHeadDim,
                                 uint32_t(page_size), /*enable_cuda_graph=*/false,
                                 /*sizeof_dtype_o=*/2, /*window_left=*/-1,
                                 /*fixed_split_size=*/-1, /*disable_split_kv=*/false,
                                 /*num_colocated_ctas=*/0, /*uniform_q_len=*/0,
                                 /*fixed_uniform_q_len=*/false, static_cast<cudaStream_t>(stream),
                                 /*kv_dtype_bytes=*/2),
        "paged prefill plan");
  prefill_plan_ = info.ToVector();
}

void paged_attention::run_prefill(const void* q, const int32_t* qo_indptr, void* o,
                                  const paged_kv_desc& kv, int batch, int qo_heads, float sm_scale,
                                  void* stream) const {
  if (prefill_plan_.empty()) throw attention_error("paged prefill: run before plan");
  fi::PrefillPlanInfo info;
  info.FromVector(prefill_plan_);
  prefill_params p;
  p.q = static_cast<bf16*>(const_cast<void*>(q));
  p.paged_kv = paged_kv(kv, batch);
  p.q_indptr = const_cast<int32_t*>(qo_indptr);
  p.o = static_cast<bf16*>(o);
  p.lse = nullptr;
  p.num_qo_heads = uint32_t(qo_heads);
  p.group_size = fi::uint_fastdiv(uint32_t(qo_heads / kv.kv_heads));
  p.q_stride_n = qo_heads * kv.head_dim;
  p.q_stride_h = kv.head_dim;
  p.window_left = -1;
  p.logits_soft_cap = 0.f;
  p.sm_scale = sm_scale;
  p.rope_rcp_scale = 1.f;
  p.rope_rcp_theta = 1e-4f;
  p.request_indices = fi::GetPtrFromBaseOffset<int32_t>(int_ws_, info.request_indices_offset);
  p.qo_tile_indices = fi::GetPtrFromBaseOffset<int32_t>(int_ws_, info.qo_tile_indices_offset);
  p.kv_tile_indices = fi::GetPtrFromBaseOffset<int32_t>(int_ws_, info.kv_tile_indices_offset);
  p.o_indptr = fi::GetPtrFromBaseOffset<int32_t>(int_ws_, info.o_indptr_offset);
  p.kv_chunk_size_ptr = fi::GetPtrFromBaseOffset<int32_t>(int_ws_, info.kv_chunk_size_ptr_offset);
  bf16* tmp_v = nullptr;
  float* tmp_s = nullptr;
  if (info.split_kv) {
    p.merge_indptr = fi::GetPtrFromBaseOffset<int32_t>(int_ws_, info.merge_indptr_offset);
    tmp_v = fi::GetPtrFromBaseOffset<bf16>(float_ws_, info.v_offset);
    tmp_s = fi::GetPtrFromBaseOffset<float>(float_ws_, info.s_offset);
  }
  p.padded_batch_size = uint32_t(info.padded_batch_size);
  p.max_total_num_rows = uint32_t(info.total_num_rows);
  auto s = static_cast<cudaStream_t>(stream);
  cudaError_t status;
  switch (info.cta_tile_q) {
    case 16:
      status = launch<16>(p, tmp_v, tmp_s, s);
      break;
    case 64:
      status = launch<64>(p, tmp_v, tmp_s, s);
      break;
    case 128:
      status = launch<128>(p, tmp_v, tmp_s, s);
      break;
    default:
      throw attention_error("paged prefill: the planner chose CTA_TILE_Q " +
                            std::to_string(info.cta_tile_q) + ", which is not compiled");
  }
  check(status, "paged prefill");
}

}  // namespace milesrt::kernels
