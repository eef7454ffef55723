#include "actors/lib/llm/paged_forward.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <cstring>

#include "actors/lib/llm/device.hpp"
#include "actors/lib/llm/invariant_ops.hpp"
#include "kernels/attention/paged_attention.hpp"
#include "kernels/decoder/decoder_kernels.hpp"

namespace milesrt::llm::paged {

paged_step make_paged_step(const std::vector<segment>& segments, const std::vector<int64_t>& ids,
                           const std::vector<int64_t>& positions, kv_cache& cache,
                           const model_config& c) {
  const int64_t T = static_cast<int64_t>(ids.size());
  const int64_t B = static_cast<int64_t>(segments.size());
  const int64_t bs = cache.block_size;
  // One int32 buffer: ids | positions | slots | qo_indptr | kv_indptr | kv_last | sequence of
  // each row | kv_indices.
  std::vector<int32_t> meta(4 * T + 3 * B + 2);
  int32_t* mid = meta.data();
  int32_t* mpos = mid + T;
  int32_t* mslot = mpos + T;
  int32_t* qo = mslot + T;
  int32_t* kvp = qo + B + 1;
  int32_t* last = kvp + B + 1;
  int32_t* mseq = last + B;
  qo[0] = 0;
  kvp[0] = 0;
  std::vector<int32_t> indices;
  bool decode_only = true;
  int64_t row = 0;
  for (int64_t b = 0; b < B; ++b) {
    const auto& s = segments[b];
    TORCH_CHECK(s.block_table != nullptr,
                "the paged forward needs a block table for every segment");
    const int64_t n = static_cast<int64_t>(s.ids.size());
    const int64_t len = s.start + n;
    const int64_t pages = (len + bs - 1) / bs;
    TORCH_CHECK(pages <= static_cast<int64_t>(s.block_table->size()), "block table of ",
                s.block_table->size(), " blocks is too short for position ", len - 1);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t p = s.start + i;
      mslot[row + i] = static_cast<int32_t>(int64_t((*s.block_table)[p / bs]) * bs + p % bs);
      mseq[row + i] = static_cast<int32_t>(b);
    }
    indices.insert(indices.end(), s.block_table->begin(), s.block_table->begin() + pages);
    qo[b + 1] = static_cast<int32_t>(row + n);
    kvp[b + 1] = static_cast<int32_t>(indices.size());
    last[b] = static_cast<int32_t>(len - (pages - 1) * bs);
    decode_only = decode_only && n == 1;
    row += n;
  }
  for (int64_t t = 0; t < T; ++t) {
    mid[t] = static_cast<int32_t>(ids[t]);
    mpos[t] = static_cast<int32_t>(positions[t]);
  }
  const int64_t head = static_cast<int64_t>(meta.size());
  auto pinned = at::empty({head + static_cast<int64_t>(indices.size())},
                          at::TensorOptions().dtype(at::kInt).pinned_memory(true));
  std::memcpy(pinned.data_ptr<int32_t>(), meta.data(), meta.size() * sizeof(int32_t));
  std::memcpy(pinned.data_ptr<int32_t>() + head, indices.data(), indices.size() * sizeof(int32_t));
  auto dev = pinned.to(cache.k.front().device(), /*non_blocking=*/true);
  paged_step out;
  out.ids = dev.narrow(0, 0, T).to(at::kLong);
  out.positions32 = dev.narrow(0, T, T);
  out.positions = out.positions32.to(at::kLong);
  out.slots = dev.narrow(0, 2 * T, T).to(at::kLong);
  out.qo_indptr = dev.narrow(0, 3 * T, B + 1);
  out.kv_indptr = dev.narrow(0, 3 * T + B + 1, B + 1);
  out.kv_last = dev.narrow(0, 3 * T + 2 * B + 2, B);
  out.seq32 = dev.narrow(0, 3 * T + 3 * B + 2, T);
  out.kv_indices = dev.narrow(0, head, static_cast<int64_t>(indices.size()));
  out.sequences = B;
  out.decode_only = decode_only;
  out.attention = std::make_shared<kernels::paged_attention>(cache.attention_float_ws.data_ptr(),
                                                             cache.attention_int_ws.data_ptr(),
                                                             cache.attention_pinned_ws.data_ptr());
  const int H = static_cast<int>(c.num_heads), KH = static_cast<int>(c.num_kv_heads),
            D = static_cast<int>(c.head_dim);
  if (decode_only) {
    out.attention->plan_decode(kvp, static_cast<int>(B), H, KH, D, static_cast<int>(bs), false,
                               current_cuda_stream());
  } else {
    out.attention->plan_prefill(qo, kvp, static_cast<int>(B), H, KH, D, static_cast<int>(bs),
                                current_cuda_stream());
  }
  return out;
}

namespace {

/// One layer's attention over the paged cache, the new tokens' K/V already in it: one kernel call
/// for the whole batch. q [T, heads, d] (contiguous) -> [T, heads, d].
at::Tensor paged_attention_only(const paged_step& b, kv_cache& cache, int64_t layer,
                                const at::Tensor& q, const model_config& c) {
  auto out = at::empty_like(q);
  kernels::paged_kv_desc kv;
  kv.k = cache.k[layer].data_ptr();
  kv.v = cache.v[layer].data_ptr();
  kv.page_size = static_cast<int>(cache.block_size);
  kv.kv_heads = static_cast<int>(c.num_kv_heads);
  kv.head_dim = static_cast<int>(c.head_dim);
  kv.indptr = b.kv_indptr.data_ptr<int32_t>();
  kv.indices = b.kv_indices.data_ptr<int32_t>();
  kv.last_page_len = b.kv_last.data_ptr<int32_t>();
  const float scale = static_cast<float>(1.0 / std::sqrt(double(c.head_dim)));
  const int B = static_cast<int>(b.sequences), H = static_cast<int>(c.num_heads);
  if (b.decode_only) {
    b.attention->run_decode(q.data_ptr(), out.data_ptr(), kv, B, H, scale, current_cuda_stream());
  } else {
    b.attention->run_prefill(q.data_ptr(), b.qo_indptr.data_ptr<int32_t>(), out.data_ptr(), kv, B,
                             H, scale, current_cuda_stream());
  }
  return out;
}

}  // namespace

/// One layer's attention over the paged cache: writes the new tokens' K/V into their slots, then
/// the kernel (FlashInfer's, or the batch-invariant one). q [T, heads, d] -> [T, heads, d].
at::Tensor paged_attend(const paged_step& b, kv_cache& cache, int64_t layer, const at::Tensor& q,
                        const at::Tensor& k, const at::Tensor& v, const model_config& c,
                        bool invariant) {
  cache.k[layer].index_copy_(0, b.slots, k);
  cache.v[layer].index_copy_(0, b.slots, v);
  if (invariant)  // a decode step's rows are their sequences: no seq (a tile of a row's heads)
    return invariant_ops::paged_attention(q, cache.k[layer], cache.v[layer], b.kv_indices,
                                          b.kv_indptr, b.decode_only ? at::Tensor() : b.seq32,
                                          b.positions32, cache.block_size);
  return paged_attention_only(b, cache, layer, q.contiguous(), c);
}

/// Whether a MoE layer runs its experts as grouped GEMMs on the device: bf16 on CUDA without
/// autograd (serving, scoring), with the expert weights laid out as the grouped GEMM needs them
/// (16-byte aligned, sizes multiples of 8).
bool grouped_experts(const at::Tensor& x, const flat_params& P, const std::string& p,
                     const model_config& c) {
  if (!x.is_cuda() || x.scalar_type() != at::kBFloat16 || at::GradMode::is_enabled()) return false;
  const auto& g0 = P.get(p + "mlp.experts.0.gate_proj.weight");
  const auto& d0 = P.get(p + "mlp.experts.0.down_proj.weight");
  return reinterpret_cast<uintptr_t>(g0.data_ptr()) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(d0.data_ptr()) % 16 == 0 && c.hidden_size % 8 == 0 &&
         c.moe_intermediate_size % 8 == 0;
}

/// A MoE layer's experts over x [T, hidden] with routing `chosen` [T, k] and `weights` [T, k]:
/// the (token, slot) pairs sorted by expert, two grouped GEMMs over every expert's rows at once
/// (at::_grouped_mm; each expert's gate/up and down weights read in place from the flat buffer),
/// SiLU*mul, the routing weights, then each token's k outputs summed in slot order (the same
/// order whatever the batch). Nothing goes to the host: a decode step stays one GPU stream.
at::Tensor moe_grouped(const at::Tensor& x, const at::Tensor& weights, const at::Tensor& chosen,
                       const flat_params& P, const std::string& p, const model_config& c) {
  const int64_t T = x.size(0), k = c.num_experts_per_tok, E = c.num_experts;
  const int64_t I = c.moe_intermediate_size, H = c.hidden_size;
  auto flat = chosen.reshape({-1});
  auto sorted = at::sort(flat, /*stable=*/true, 0, /*descending=*/false);
  const auto& experts = std::get<0>(sorted);
  const auto& order = std::get<1>(sorted);  // (token, slot) pairs by expert
  auto ends =
      at::searchsorted(experts, at::arange(E, flat.options()), /*out_int32=*/true, /*right=*/true);
  auto xs = x.index_select(0, at::div(order, k, "floor"));  // [T k, hidden]
  const auto& g0 = P.get(p + "mlp.experts.0.gate_proj.weight");
  const auto& d0 = P.get(p + "mlp.experts.0.down_proj.weight");
  const int64_t expert_stride = 3 * I * H;  // gate, up, down of one expert, back to back
  auto w_gate_up =
      g0.as_strided({E, 2 * I, H}, {expert_stride, H, 1}).transpose(1, 2);        // [E, H, 2I]
  auto w_down = d0.as_strided({E, H, I}, {expert_stride, I, 1}).transpose(1, 2);  // [E, I, H]
  auto gate_up = at::_grouped_mm(xs, w_gate_up, ends);
  auto act = at::empty({gate_up.size(0), I}, x.options());
  kernels::silu_mul_cuda(gate_up.data_ptr(), act.data_ptr(), gate_up.size(0), I,
                         current_cuda_stream());
  auto y = at::_grouped_mm(act, w_down, ends) *
           weights.reshape({-1}).index_select(0, order).unsqueeze(1);
  auto by_slot = at::empty_like(y).index_copy_(0, order, y);  // back to (token, slot) order
  return by_slot.view({T, k, H}).sum(1);
}

/// Whether the serving forward uses the fused bf16 kernels (kernels/decoder): dense layers,
/// head_dim 128, bf16 on the GPU.
bool fused_serving(const model_config& c, at::ScalarType dtype) {
  return dtype == at::kBFloat16 && c.num_experts == 0 && c.head_dim == kernels::kFusedHeadDim;
}

namespace {

/// The weights of consecutive parameters that the flat buffer holds back to back (q/k/v, gate/up)
/// as one matrix [sum of rows, in] (or one vector for biases), for one GEMM instead of several.
at::Tensor joined(const flat_params& P, const std::vector<std::string>& names) {
  const auto& first = P.get(names.front());
  int64_t rows = 0;
  const char* next = static_cast<const char*>(first.data_ptr());
  for (const auto& n : names) {
    const auto& t = P.get(n);
    TORCH_CHECK(t.data_ptr() == next, "joined weights: '", n,
                "' does not follow the previous one in the buffer");
    next += t.numel() * t.element_size();
    rows += t.size(0);
  }
  if (first.dim() == 1) return first.as_strided({rows}, {1});
  return first.as_strided({rows, first.size(1)}, {first.size(1), 1});
}

at::Tensor qkv_bias(const flat_params& P, const std::string& p) {
  return joined(
      P, {p + "self_attn.q_proj.bias", p + "self_attn.k_proj.bias", p + "self_attn.v_proj.bias"});
}

}  // namespace

/// The serving forward over a paged step with the fused kernels: per layer one fused add+RMSNorm,
/// the QKV GEMM, QK-norm+RoPE+KV append, paged attention, the output GEMM, add+RMSNorm, the
/// gate/up GEMM, SiLU*mul and the down GEMM (about 10 kernels). Returns the final-norm hidden
/// states [T, hidden].
///
/// In the true on-policy mode (`invariant`) the same, with the batch-invariant GEMM and attention.
/// The training forward runs each projection alone, but the invariant GEMM's column j is the same
/// sum whatever other weight rows share the call, so q/k/v and gate/up as one GEMM each give its
/// numbers; the norms, QK-norm + RoPE and SiLU*mul are the training forward's arithmetic (the same
/// kernel, or the same expressions in the same order).
at::Tensor fused_forward(const flat_params& P, const model_config& c, const paged_step& b,
                         kv_cache& cache, at::Tensor h,
                         const std::pair<at::Tensor, at::Tensor>& rope, bool invariant) {
  const int64_t T = h.size(0);
  void* stream = current_cuda_stream();
  const float eps = static_cast<float>(c.rms_norm_eps);
  auto x = at::empty_like(h);
  // h += delta (when given); x = RMSNorm(h) * w.
  auto norm = [&](const at::Tensor& delta, const at::Tensor& w) {
    kernels::add_rmsnorm_cuda(h.data_ptr(), delta.defined() ? delta.data_ptr() : nullptr,
                              w.data_ptr(), x.data_ptr(), T, c.hidden_size, eps, stream);
  };
  // y = x w^T, by the invariant GEMM in the mode.
  auto mm = [invariant](const at::Tensor& a, const at::Tensor& w) {
    return invariant ? invariant_ops::mm(a, w) : at::mm(a, w.t());
  };
  const auto cos = rope.first.reshape({T, c.head_dim}).contiguous();
  const auto sin = rope.second.reshape({T, c.head_dim}).contiguous();
  norm(at::Tensor(), P.get("model.layers.0.input_layernorm.weight"));
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    auto w_qkv = joined(P, {p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight",
                            p + "self_attn.v_proj.weight"});
    auto qkv =
        c.attention_bias && !invariant ? at::addmm(qkv_bias(P, p), x, w_qkv.t()) : mm(x, w_qkv);
    // In the mode the bias is added to the rounded product, as the training forward adds it.
    if (c.attention_bias && invariant) qkv.add_(qkv_bias(P, p));
    auto q = at::empty({T, c.num_heads, c.head_dim}, h.options());
    kernels::qk_rope_args a;
    a.qkv = qkv.data_ptr();
    a.q_norm = c.qk_norm ? P.get(p + "self_attn.q_norm.weight").data_ptr() : nullptr;
    a.k_norm = c.qk_norm ? P.get(p + "self_attn.k_norm.weight").data_ptr() : nullptr;
    a.cos = cos.data_ptr();
    a.sin = sin.data_ptr();
    a.slots = b.slots.data_ptr<int64_t>();
    a.q_out = q.data_ptr();
    a.k_cache = cache.k[layer].data_ptr();
    a.v_cache = cache.v[layer].data_ptr();
    a.tokens = T;
    a.heads = c.num_heads;
    a.kv_heads = c.num_kv_heads;
    a.eps = eps;
    kernels::qk_rope_append_cuda(a, stream);
    auto attn = invariant
                    ? invariant_ops::paged_attention(
                          q, cache.k[layer], cache.v[layer], b.kv_indices, b.kv_indptr,
                          b.decode_only ? at::Tensor() : b.seq32, b.positions32, cache.block_size)
                    : paged_attention_only(b, cache, layer, q, c);
    norm(mm(attn.view({T, c.num_heads * c.head_dim}), P.get(p + "self_attn.o_proj.weight")),
         P.get(p + "post_attention_layernorm.weight"));
    auto gate_up = mm(x, joined(P, {p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"}));
    auto act = at::empty({T, c.intermediate_size}, h.options());
    kernels::silu_mul_cuda(gate_up.data_ptr(), act.data_ptr(), T, c.intermediate_size, stream);
    const std::string next =
        layer + 1 < c.num_layers
            ? "model.layers." + std::to_string(layer + 1) + ".input_layernorm.weight"
            : "model.norm.weight";
    norm(mm(act, P.get(p + "mlp.down_proj.weight")), P.get(next));
  }
  return x;
}

}  // namespace milesrt::llm::paged
