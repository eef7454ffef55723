#include "actors/lib/llm/row_ops.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace milesrt::llm::row_ops {
namespace {

at::Tensor rotate_half(const at::Tensor& x) {
  auto half = x.size(-1) / 2;
  return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

}  // namespace

/// Pads rows to a multiple of 8 (at least 8): MKL's sgemm then computes each row the same way
/// whatever the number of rows, which is what makes the two forward paths agree bitwise.
at::Tensor pad_rows(const at::Tensor& x) {
  const int64_t n = x.size(0);
  const int64_t padded = std::max<int64_t>(8, (n + 7) / 8 * 8);
  if (padded == n) return x;
  return at::cat({x, at::zeros({padded - n, x.size(1)}, x.options())});
}

/// MKL's sgemm computes a row the same way whatever else is in the call only within one regime of
/// row counts: 8 rows and 2048 rows take other kernels for some inner sizes (K = 192 already).
/// With every CPU GEMM cut into calls of exactly kGemmRows rows, a row's result depends on nothing
/// but its own values (checked at K from 64 to 3072, any position inside the block).
constexpr int64_t kGemmRows = 16;

/// x [n, in] times w [out, in]^T in calls of kGemmRows rows: a row-invariant GEMM on the CPU.
at::Tensor blocked_mm(const at::Tensor& x, const at::Tensor& w) {
  const int64_t n = x.size(0);
  auto one = [&](const at::Tensor& rows) {
    const int64_t m = rows.size(0);
    if (m == kGemmRows) return at::mm(rows, w.t());
    auto padded = at::cat({rows, at::zeros({kGemmRows - m, rows.size(1)}, rows.options())});
    return at::mm(padded, w.t()).narrow(0, 0, m);
  };
  if (n <= kGemmRows) return one(x);
  std::vector<at::Tensor> parts;
  for (int64_t i = 0; i < n; i += kGemmRows)
    parts.push_back(one(x.narrow(0, i, std::min(kGemmRows, n - i))));
  return at::cat(parts);
}

/// x [n, in] times w [out, in]^T: a row-invariant GEMM on the CPU.
at::Tensor linear_rows(const at::Tensor& x, const at::Tensor& w) {
  if (x.is_cuda()) return at::mm(x, w.t());
  return blocked_mm(x, w);
}

at::Tensor linear_rows(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  return linear_rows(x, w) + b;
}

/// RMSNorm over the last dimension, in fp32 as transformers computes it.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
  auto xf = x.to(at::kFloat);
  auto var = xf.pow(2).mean(-1, /*keepdim=*/true);
  return w * (xf * at::rsqrt(var + eps)).to(x.scalar_type());
}

/// The rotary tables of `positions` [n]: cos and sin [n, 1, d] in `dtype` (computed once per
/// forward, shared by every layer).
std::pair<at::Tensor, at::Tensor> rope_tables(const at::Tensor& positions,
                                              const at::Tensor& inv_freq, at::ScalarType dtype) {
  auto freqs = positions.to(at::kFloat).unsqueeze(1) * inv_freq.unsqueeze(0);  // [n, d/2]
  auto emb = at::cat({freqs, freqs}, -1);
  return {emb.cos().to(dtype).unsqueeze(1), emb.sin().to(dtype).unsqueeze(1)};
}

/// Rotary embedding of x [n, heads, d] with the tables of its positions.
at::Tensor apply_rope(const at::Tensor& x, const std::pair<at::Tensor, at::Tensor>& table) {
  return x * table.first + rotate_half(x) * table.second;
}

/// Attention of the new rows of one sequence: q [n, heads, d] at positions start..start+n-1,
/// against keys/values k_all, v_all [start+n, kv_heads, d]. Each position p attends with the same
/// calls and shapes in both paths: its kv group's queries padded to 8 rows, keys/values 0..p.
at::Tensor attend(const at::Tensor& q, const at::Tensor& k_all, const at::Tensor& v_all,
                  int64_t start, int64_t kv_heads) {
  const int64_t n = q.size(0), heads = q.size(1), d = q.size(2), group = heads / kv_heads;
  const double scale = 1.0 / std::sqrt(double(d));
  auto out = at::empty_like(q);
  if (q.is_cuda()) {
    // GPU: one fused call per sequence (bf16; bitwise agreement is a CPU fp32 property).
    auto qh = q.transpose(0, 1).unsqueeze(0);
    auto kh = k_all.repeat_interleave(group, 1).transpose(0, 1).unsqueeze(0);
    auto vh = v_all.repeat_interleave(group, 1).transpose(0, 1).unsqueeze(0);
    auto mask = at::ones({n, start + n}, q.options().dtype(at::kBool)).tril(start);
    auto o = at::scaled_dot_product_attention(qh, kh, vh, mask);
    return o.squeeze(0).transpose(0, 1);
  }
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = start + i;
    for (int64_t g = 0; g < kv_heads; ++g) {
      auto qg = q[i].narrow(0, g * group, group);                     // [group, d]
      auto kg = k_all.narrow(0, 0, p + 1).select(1, g).contiguous();  // [p+1, d]
      auto vg = v_all.narrow(0, 0, p + 1).select(1, g).contiguous();
      auto scores = at::mm(pad_rows(qg), kg.t()).narrow(0, 0, group) * scale;
      auto probs = at::softmax(scores.to(at::kFloat), -1).to(q.scalar_type());
      out[i].narrow(0, g * group, group).copy_(at::mm(pad_rows(probs), vg).narrow(0, 0, group));
    }
  }
  return out;
}

}  // namespace milesrt::llm::row_ops
