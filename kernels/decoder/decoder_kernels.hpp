#pragma once
/// Fused bf16 kernels of a Qwen3/Llama decoder layer on the serving path (each with a CPU reference
/// that rounds to bf16 at the same points; no ATen, raw pointers and a stream):
///
///   add_rmsnorm: h <- h + delta (bf16), x <- RMSNorm(h) * w, transformers' way: the mean of
///     squares in fp32, the normalised value rounded to bf16, then times w rounded to bf16.
///   qk_rope_append: from the fused QKV projection [T, (H + 2 KH) * 128]: optional per-head
///     RMSNorm of q and k (Qwen3's q_norm / k_norm), rotary embedding of q and k (q*cos +
///     rotate_half(q)*sin, each product and the sum rounded to bf16, as transformers computes it in
///     bf16), q written out [T, H, 128], k and v written into the paged KV cache at their slots.
///   silu_mul: out = silu(gate) * up from the fused gate/up projection [T, 2I].
///
/// Element-wise results equal the ATen ops bit for bit; the RMSNorm's sum of squares is reduced in
/// another order than ATen's, so a normalised value can differ by one bf16 step. Each row's
/// reduction order is fixed (independent of the batch): batch-invariant.

#include <cstdint>

namespace milesrt::kernels {

/// h, delta, x: [rows, cols] bf16 (raw uint16 bits on the host); delta may be null (then h is
/// only normalised). w: [cols] bf16.
void add_rmsnorm_cuda(void* h, const void* delta, const void* w, void* x, int64_t rows,
                      int64_t cols, float eps, void* stream);
/// The same with the sum written to `sum` (h is left alone; sum may be h).
void add_rmsnorm_out_cuda(const void* h, const void* delta, void* sum, const void* w, void* x,
                          int64_t rows, int64_t cols, float eps, void* stream);
void add_rmsnorm_cpu(uint16_t* h, const uint16_t* delta, const uint16_t* w, uint16_t* x,
                     int64_t rows, int64_t cols, float eps);

struct qk_rope_args {
  const void* qkv = nullptr;     ///< [T, (H + 2 KH) * 128] bf16
  const void* q_norm = nullptr;  ///< [128] bf16 or null (no QK norm)
  const void* k_norm = nullptr;
  const void* cos = nullptr;  ///< [T, 128] bf16 (the rotary tables of each token)
  const void* sin = nullptr;
  const int64_t* slots = nullptr;  ///< [T] cache rows
  void* q_out = nullptr;           ///< [T, H, 128] bf16
  void* k_cache = nullptr;         ///< [cache rows, KH, 128] bf16
  void* v_cache = nullptr;
  int64_t tokens = 0, heads = 0, kv_heads = 0;
  float eps = 1e-6f;
};
constexpr int kFusedHeadDim = 128;
void qk_rope_append_cuda(const qk_rope_args& a, void* stream);
void qk_rope_append_cpu(const qk_rope_args& a);

/// gate_up: [rows, 2 * inter] bf16 (gate then up); out: [rows, inter].
void silu_mul_cuda(const void* gate_up, void* out, int64_t rows, int64_t inter, void* stream);
void silu_mul_cpu(const uint16_t* gate_up, uint16_t* out, int64_t rows, int64_t inter);

}  // namespace milesrt::kernels
