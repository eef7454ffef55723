// The decoder's forward pass: the inputs put on the device, each layer's attention (paged,
// variable-length flash attention, batch-invariant, or one segment at a time) and dense MLP,
// activation checkpointing, and decoder::forward choosing among them. Mixtures of experts:
// forward_moe.cpp.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>

#include "actors/lib/llm/forward_pass.hpp"
#include "actors/lib/llm/paged_forward.hpp"

namespace milesrt::llm {
namespace {

/// libtorch's flash attention covers fp16/bf16 on CUDA with head sizes up to 256.
varlen_batch training_varlen(const std::vector<segment>& segments, const forward_options& opt,
                             const model_config& c, at::Device device, at::ScalarType dtype) {
  varlen_batch b;
  if (!device.is_cuda() || opt.cache != nullptr || opt.step != nullptr) return b;
  if (dtype != at::kBFloat16 && dtype != at::kHalf) return b;
  if (c.head_dim % 8 != 0 || c.head_dim > 256 || segments.empty()) return b;
  std::vector<int32_t> cu{0};
  for (const auto& s : segments) {
    const auto n = static_cast<int64_t>(s.ids.size());
    b.max_len = std::max(b.max_len, n);
    cu.push_back(cu.back() + static_cast<int32_t>(n));
  }
  b.cu_seqlens = at::tensor(cu, at::kInt).to(device);
  b.scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  return b;
}

/// Causal attention of every packed segment at once: q [T, heads, d], k and v [T, kv_heads, d]
/// (grouped-query heads are the kernel's own); autograd runs flash attention's backward.
at::Tensor varlen_attention(const varlen_batch& b, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v) {
  auto out =
      at::_flash_attention_forward(q.contiguous(), k.contiguous(), v.contiguous(), b.cu_seqlens,
                                   b.cu_seqlens, b.max_len, b.max_len, 0.0, /*is_causal=*/true,
                                   /*return_debug_mask=*/false, b.scale);
  return std::get<0>(out);
}

}  // namespace

forward_pass::forward_pass(const model_config& config, const flat_params& params,
                           const std::vector<segment>& segs, const forward_options& options,
                           at::Device dev, at::ScalarType type, const at::Tensor& inv_freq,
                           bool batch_invariant)
    : c(config),
      P(params),
      segments(segs),
      opt(options),
      device(dev),
      dtype(type),
      invariant(batch_invariant && dev.is_cuda()) {
  std::vector<int64_t> host_ids, host_pos;
  static const std::vector<segment> kPrepared;  // a prepared step has its ids on the device
  for (const auto& s : opt.step != nullptr ? kPrepared : segments) {
    TORCH_CHECK(s.block_table != nullptr || s.start == 0, "a segment that starts at position ",
                s.start, " needs a block table");
    TORCH_CHECK(s.block_table == nullptr || opt.cache != nullptr, "a block table needs a cache");
    for (size_t i = 0; i < s.ids.size(); ++i) {
      TORCH_CHECK(s.ids[i] >= 0 && s.ids[i] < c.vocab_size, "token id ", s.ids[i],
                  " is outside the vocabulary of ", c.vocab_size);
      host_ids.push_back(s.ids[i]);
      host_pos.push_back(s.start + static_cast<int64_t>(i));
    }
  }
  // Every activation keeps a multiple of 8 rows (padding rows hold token 0 at position 0): GEMMs
  // are then row-invariant, row reductions run serially per row, and with dimensions that are
  // multiples of 16 each element meets the same vectorized code in both paths.
  // The serving path on the GPU: one batch over the paged cache, its metadata sent in one copy
  // (or a step prepared by the caller).
  paged = opt.cache != nullptr && opt.cache->paged_kernels();
  TORCH_CHECK(opt.step == nullptr || paged, "a prepared step needs a cache with paged kernels");
  T = opt.step != nullptr ? opt.step->ids.size(0) : static_cast<int64_t>(host_ids.size());
  Tp = device.is_cuda() ? T : std::max<int64_t>(8, (T + 7) / 8 * 8);
  host_ids.resize(Tp, 0);
  host_pos.resize(Tp, 0);
  if (paged) {
    batch = opt.step != nullptr
                ? *opt.step
                : paged::make_paged_step(segments, host_ids, host_pos, *opt.cache, c);
    ids = batch.ids;
    pos = batch.positions;
  } else {
    ids = at::tensor(host_ids, at::kLong).to(device);
    pos = at::tensor(host_pos, at::kLong).to(device);
  }
  rope = row_ops::rope_tables(pos, inv_freq, dtype);
  TORCH_CHECK(!opt.checkpoint_head || opt.cache == nullptr,
              "activation checkpointing is for the training path (no cache)");

  // The training path on the GPU: one variable-length flash-attention call over all segments
  // (forward and backward), from their cumulative lengths.
  varlen = training_varlen(segments, opt, c, device, dtype);

  // With it, the element-wise layers run as the training kernels (forward and backward). In the
  // true on-policy mode both paths run them, and the batch-invariant GEMMs and attention.
  train_kernels = invariant || (varlen.cu_seqlens.defined() && train_ops::available(device, dtype));
  if (invariant && !paged) {
    TORCH_CHECK(varlen.cu_seqlens.defined(),
                "trueOnPolicy on cuda: the forward needs a paged cache or no cache");
    std::vector<int64_t> lengths;
    for (const auto& s : segments) lengths.push_back(static_cast<int64_t>(s.ids.size()));
    keys = invariant_ops::make_packed_keys(lengths, varlen.cu_seqlens, varlen.max_len);
  }
}

forward_pass::residual forward_pass::run_layer(int64_t layer, residual s, bool record) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  auto attended = attention(layer, p, s);
  s.delta = attended;
  // MLP or mixture of experts.
  auto x = add_norm(s, P.get(p + "post_attention_layernorm.weight"));
  s.delta = c.is_moe_layer(layer) ? moe_ffn(layer, p, x, record) : dense_ffn(layer, p, x);
  return s;
}

at::Tensor forward_pass::attention(int64_t layer, const std::string& p, residual& s) const {
  auto x = add_norm(s, P.get(p + "input_layernorm.weight"));
  auto q = linear(x, P.get(p + "self_attn.q_proj.weight"));
  auto k = linear(x, P.get(p + "self_attn.k_proj.weight"));
  auto v = linear(x, P.get(p + "self_attn.v_proj.weight"));
  if (c.attention_bias) {
    q = q + P.get(p + "self_attn.q_proj.bias");
    k = k + P.get(p + "self_attn.k_proj.bias");
    v = v + P.get(p + "self_attn.v_proj.bias");
  }
  q = adapted(q, layer, "self_attn.q_proj", x).view({Tp, c.num_heads, c.head_dim});
  k = adapted(k, layer, "self_attn.k_proj", x).view({Tp, c.num_kv_heads, c.head_dim});
  v = adapted(v, layer, "self_attn.v_proj", x).view({Tp, c.num_kv_heads, c.head_dim});
  if (c.qk_norm && train_kernels && c.head_dim == 128) {  // norm and rotation in one pass
    const double eps = c.rms_norm_eps;
    q = train_ops::qk_norm_rope(q, P.get(p + "self_attn.q_norm.weight"), rope.first, rope.second,
                                eps);
    k = train_ops::qk_norm_rope(k, P.get(p + "self_attn.k_norm.weight"), rope.first, rope.second,
                                eps);
  } else {
    if (c.qk_norm) {
      q = norm(q, P.get(p + "self_attn.q_norm.weight"));
      k = norm(k, P.get(p + "self_attn.k_norm.weight"));
    }
    q = rotate(q);
    k = rotate(k);
  }

  const auto attn =
      paged ? paged::paged_attend(batch, *opt.cache, layer, q, k.detach(), v.detach(), c, invariant)
                  .reshape({T, c.num_heads * c.head_dim})
            : segment_attention(layer, q, k, v);
  return adapted(linear(attn, P.get(p + "self_attn.o_proj.weight")), layer, "self_attn.o_proj",
                 attn);
}

// Attention one segment at a time (the CPU path, which keeps each position's calls
// batch-invariant, and caches the paged kernels do not cover).
at::Tensor forward_pass::segment_attention(int64_t layer, const at::Tensor& q, const at::Tensor& k,
                                           const at::Tensor& v) const {
  if (invariant)
    return invariant_ops::packed_attention(keys, q, k, v).reshape({Tp, c.num_heads * c.head_dim});
  if (varlen.cu_seqlens.defined())
    return varlen_attention(varlen, q, k, v).reshape({Tp, c.num_heads * c.head_dim});
  std::vector<at::Tensor> outs;
  int64_t row = 0;
  for (const auto& s : segments) {
    const int64_t n = static_cast<int64_t>(s.ids.size());
    auto qs = q.narrow(0, row, n), ks = k.narrow(0, row, n), vs = v.narrow(0, row, n);
    at::Tensor k_all = ks, v_all = vs;
    if (s.block_table != nullptr) {
      auto& kc = opt.cache->k[layer];
      auto& vc = opt.cache->v[layer];
      auto write = cache_slots(*s.block_table, opt.cache->block_size, s.start, s.start + n, device);
      kc.index_copy_(0, write, ks.detach());
      vc.index_copy_(0, write, vs.detach());
      auto read = cache_slots(*s.block_table, opt.cache->block_size, 0, s.start + n, device);
      k_all = kc.index_select(0, read);
      v_all = vc.index_select(0, read);
    }
    outs.push_back(row_ops::attend(qs, k_all, v_all, s.start, c.num_kv_heads));
    row += n;
  }
  if (Tp > T) outs.push_back(at::zeros({Tp - T, c.num_heads, c.head_dim}, q.options()));
  return at::cat(outs, 0).reshape({Tp, c.num_heads * c.head_dim});
}

at::Tensor forward_pass::dense_ffn(int64_t layer, const std::string& p, const at::Tensor& x) const {
  auto gate = adapted(linear(x, P.get(p + "mlp.gate_proj.weight")), layer, "mlp.gate_proj", x);
  auto up = adapted(linear(x, P.get(p + "mlp.up_proj.weight")), layer, "mlp.up_proj", x);
  auto act = swiglu(gate, up);
  return adapted(linear(act, P.get(p + "mlp.down_proj.weight")), layer, "mlp.down_proj", act);
}

namespace {

/// Activation checkpointing: a forward without autograd keeps only the input of each of the first
/// `recomputed` layers; the later layers run with autograd, the head computes the loss from the
/// final hidden states and the backward runs through them; then each recomputed layer is
/// computed again, last to first, with autograd on, and back-propagated on its own.
forward_result checkpointed_forward(forward_pass& f) {
  const auto& c = f.c;
  const auto& embed = f.P.get("model.embed_tokens.weight");
  const int64_t recomputed =
      f.opt.checkpoint_layers > 0 ? std::min(f.opt.checkpoint_layers, c.num_layers) : c.num_layers;
  // A layer's stream folded into one tensor (h + its pending delta): what is kept per recomputed
  // layer, so checkpointing holds one [tokens, hidden] tensor a layer.
  auto fold = [](const forward_pass::residual& s) {
    return s.delta.defined() ? s.h + s.delta : s.h;
  };
  std::vector<at::Tensor> inputs;
  at::Tensor boundary;
  {
    at::NoGradGuard no_grad;
    at::Tensor h = embed.index_select(0, f.ids);
    for (int64_t layer = 0; layer < recomputed; ++layer) {
      inputs.push_back(h);
      h = fold(f.run_layer(layer, {h, at::Tensor()}, true));
    }
    boundary = h;
  }
  auto x = boundary.detach().requires_grad_(true);
  forward_pass::residual kept{x, at::Tensor()};
  for (int64_t layer = recomputed; layer < c.num_layers; ++layer)
    kept = f.run_layer(layer, kept, true);
  auto hidden = f.add_norm(kept, f.P.get("model.norm.weight")).narrow(0, 0, f.T);
  at::Tensor loss = f.opt.checkpoint_head(hidden);
  f.result.hidden = hidden.detach();
  if (!loss.defined() || !loss.requires_grad()) return std::move(f.result);
  loss.backward();
  at::Tensor g = x.grad();
  for (int64_t layer = recomputed - 1; layer >= 0 && g.defined(); --layer) {
    auto xin = inputs[layer].detach().requires_grad_(true);
    fold(f.run_layer(layer, {xin, at::Tensor()}, false)).backward(g);
    g = xin.grad();
  }
  if (g.defined() && embed.requires_grad()) f.embed_rows().backward(g);
  return std::move(f.result);
}

}  // namespace

forward_result decoder::forward(const std::vector<segment>& segments,
                                const forward_options& opt) const {
  forward_pass f(config_, *params_, segments, opt, device_, dtype_, inv_freq_, batch_invariant_);
  if (adapter_ && !adapter_->merged() && !opt.adapters_off)
    f.lora = adapter_->view(opt.lora_dropout, opt.lora_dropout_seed);
  const auto& embed = params_->get("model.embed_tokens.weight");
  // The fused serving kernels know no adapters: an adapted model serves through the layers below.
  // In the true on-policy mode they serve the QK-norm models (Qwen3) that the mode's tests hold to
  // the training forward bit for bit; others take the layers below, projection by projection.
  if (f.paged && !f.lora && (!f.invariant || config_.qk_norm) &&
      paged::fused_serving(config_, dtype_)) {
    f.result.hidden = paged::fused_forward(*params_, config_, f.batch, *opt.cache,
                                           embed.index_select(0, f.ids), f.rope, f.invariant);
    return std::move(f.result);
  }
  if (opt.checkpoint_head) return checkpointed_forward(f);
  forward_pass::residual s{f.embed_rows(), at::Tensor()};
  for (int64_t layer = 0; layer < config_.num_layers; ++layer)
    s = f.run_layer(layer, std::move(s), true);
  f.result.hidden = f.add_norm(s, params_->get("model.norm.weight")).narrow(0, 0, f.T);
  return std::move(f.result);
}

}  // namespace milesrt::llm
