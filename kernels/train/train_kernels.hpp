#pragma once
/// bf16 kernels of the training path's backward (and the forwards they pair with), each with a CPU
/// reference that computes the same formula in the same order (no ATen: raw pointers and a stream;
/// actors/lib/llm/train_ops.cpp wraps them as autograd functions).
///
///   rmsnorm: y = w * bf16(x * rstd), rstd = 1 / sqrt(mean(x^2) + eps) in fp32 (transformers'
///     order; the forward is add_rmsnorm_cuda in kernels/decoder). Backward, with n = x * rstd and
///     dn = dy * w in fp32: dx = rstd * (dn - n * mean(dn * n)), dw = sum over rows of dy * bf16(n)
///     (fp32, reduced in a fixed order: blocks of norm_rows_per_block rows, then the blocks in
///     order). Where the normalised x is also h + delta's residual stream (add_rmsnorm), the
///     stream's own gradient dres joins dx before its one rounding: dx = bf16(dx_norm + dres).
///   rope: out = bf16(bf16(x * cos) + bf16(rotate_half(x) * sin)) over [rows, heads, d] with tables
///     [rows, d]; backward: for i < d/2: dx_i = g_i cos_i + g_{i+d/2} sin_{i+d/2};
///     dx_{i+d/2} = g_{i+d/2} cos_{i+d/2} - g_i sin_i.
///   silu_mul: out = bf16(bf16(silu(g)) * u); backward: du = dout * bf16(silu(g)),
///     dg = dout * u * s * (1 + g (1 - s)) with s = sigmoid(g).
///   qk_norm_rope: Qwen3's per-head q/k RMSNorm and the rotary embedding in one pass over heads of
///     128: out = rope(bf16(w * bf16(x * rstd))), each step rounded as add_rmsnorm and rope round
///     it (and as the serving path's qk_rope_append: one warp a head, the sum of squares reduced in
///     its order). Backward: rope's transposed rotation rounded to bf16, then rmsnorm's backward
///     per head row, dw reduced in rmsnorm_backward's blocks and order.
///   logprob_backward: the gradient of a row's log-prob of its target and of its entropy with
///     respect to its logits x (z = x / temperature, p = exp(z - lse)):
///     dx_j = (-p_j (g_lp + g_ent (z_j - lse + H)) + g_lp [j = target]) / temperature.
/// All element-wise backward arithmetic is fp32, rounded to bf16 once at the end.

#include <cstdint>

namespace milesrt::kernels {

/// The rmsnorm backward's blocking: a block takes this many consecutive rows (at most 2048 blocks),
/// and dw is the blocks' partial sums added in block order.
inline int64_t norm_rows_per_block(int64_t rows) { return rows <= 2048 ? 1 : (rows + 2047) / 2048; }

/// False where milesrt was built without CUDA kernels (the *_cuda functions then throw).
bool train_kernels_available();

/// Bytes of fp32 workspace rmsnorm_backward_cuda needs (the per-block partial sums of dw).
inline int64_t rmsnorm_backward_workspace(int64_t rows, int64_t cols) {
  const int64_t per = norm_rows_per_block(rows);
  return ((rows + per - 1) / per) * cols * 4;
}
/// dy, x, dres (or null): [rows, cols] bf16; w: [cols] bf16. dx: [rows, cols] bf16. dw: [cols]
/// fp32, overwritten; or, where dw_acc ([cols] bf16, a gradient being accumulated) is not null,
/// dw_acc[c] = bf16(dw_acc[c] + dw[c]) and dw is not written; both null: no dw.
void rmsnorm_backward_cuda(const void* dy, const void* x, const void* w, const void* dres, void* dx,
                           float* dw, void* dw_acc, int64_t rows, int64_t cols, float eps,
                           float* workspace, void* stream);
void rmsnorm_backward_cpu(const uint16_t* dy, const uint16_t* x, const uint16_t* w,
                          const uint16_t* dres, uint16_t* dx, float* dw, int64_t rows, int64_t cols,
                          float eps);

/// x, out: [rows, heads, d] bf16 (contiguous); cos, sin: [rows, d] bf16. `backward` applies the
/// transposed rotation to a gradient instead.
void rope_cuda(const void* x, const void* cos, const void* sin, void* out, int64_t rows,
               int64_t heads, int64_t d, bool backward, void* stream);
void rope_cpu(const uint16_t* x, const uint16_t* cos, const uint16_t* sin, uint16_t* out,
              int64_t rows, int64_t heads, int64_t d, bool backward);

/// gate, up, out: [n] bf16 (the same element layout).
void silu_mul_forward_cuda(const void* gate, const void* up, void* out, int64_t n, void* stream);
void silu_mul_backward_cuda(const void* dout, const void* gate, const void* up, void* dgate,
                            void* dup, int64_t n, void* stream);
void silu_mul_forward_cpu(const uint16_t* gate, const uint16_t* up, uint16_t* out, int64_t n);
void silu_mul_backward_cpu(const uint16_t* dout, const uint16_t* gate, const uint16_t* up,
                           uint16_t* dgate, uint16_t* dup, int64_t n);

/// x, out: [rows, heads, 128] bf16; w: [128]; cos, sin: [rows, 128] bf16.
void qk_norm_rope_cuda(const void* x, const void* w, const void* cos, const void* sin, void* out,
                       int64_t rows, int64_t heads, float eps, void* stream);
void qk_norm_rope_cpu(const uint16_t* x, const uint16_t* w, const uint16_t* cos,
                      const uint16_t* sin, uint16_t* out, int64_t rows, int64_t heads, float eps);
/// dout, x, dx: [rows, heads, 128] bf16; dw / dw_acc as rmsnorm_backward_cuda's; workspace:
/// rmsnorm_backward_workspace(rows * heads, 128) bytes.
void qk_norm_rope_backward_cuda(const void* dout, const void* x, const void* w, const void* cos,
                                const void* sin, void* dx, float* dw, void* dw_acc, int64_t rows,
                                int64_t heads, float eps, float* workspace, void* stream);
void qk_norm_rope_backward_cpu(const uint16_t* dout, const uint16_t* x, const uint16_t* w,
                               const uint16_t* cos, const uint16_t* sin, uint16_t* dx, float* dw,
                               int64_t rows, int64_t heads, float eps);

/// logits: [rows, vocab] bf16 (row stride ld), overwritten by their gradient (same layout);
/// target: [rows]; lse, entropy, g_lp, g_ent: [rows] fp32 (the forward's lse and H, and the
/// gradients of the log-prob and the entropy).
void logprob_backward_cuda(void* logits, int64_t rows, int64_t vocab, int64_t ld,
                           const int64_t* target, const float* lse, const float* entropy,
                           const float* g_lp, const float* g_ent, float temperature, void* stream);
void logprob_backward_cpu(uint16_t* logits, int64_t rows, int64_t vocab, int64_t ld,
                          const int64_t* target, const float* lse, const float* entropy,
                          const float* g_lp, const float* g_ent, float temperature);

}  // namespace milesrt::kernels
