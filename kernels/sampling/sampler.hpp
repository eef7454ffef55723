#pragma once
/// Sampling for a batch of rows on the GPU (each row's vocabulary in fixed slices, one thread block
/// per slice, merged in slice order), with a CPU reference.
///
/// Each row: z = logits / temperature (fp32); the token is argmax over the kept vocabulary of
/// z + g, g = -log(-log(u)) Gumbel noise with u = philox_uniform(seed, position, vocab id) — an
/// exact draw from softmax(z) restricted to the kept tokens (the Gumbel-max trick) whose random
/// numbers depend only on the request's seed and the token's position, so a request samples the
/// same tokens at any batch row and any batch size. Kept tokens: z >= min_kept[row] (a top-k /
/// top-p threshold computed by the caller: the z of a kept token, so at least one is kept), or
/// every token when min_kept is null.
/// Also per row, from the same z over the full vocabulary: the sampled token's log-prob
/// z[token] - logsumexp(z) and, when asked, the entropy logsumexp(z) - sum softmax(z) * z.
/// No ATen here: raw pointers and a stream.

#include <cstddef>
#include <cstdint>

namespace milesrt::kernels {

struct sample_rows_args {
  const void* logits = nullptr;  ///< [rows, vocab] with row stride `ld` (elements)
  bool bf16 = true;              ///< logits are bf16 (else fp32)
  int64_t rows = 0, vocab = 0, ld = 0;
  const float* temperature = nullptr;  ///< [rows], > 0
  const float* min_kept = nullptr;     ///< [rows] or null
  const uint64_t* seed = nullptr;      ///< [rows]
  const int64_t* position = nullptr;   ///< [rows]
  int64_t* token = nullptr;            ///< out [rows]
  float* logprob = nullptr;            ///< out [rows]
  float* entropy = nullptr;            ///< out [rows] or null
  void* workspace =
      nullptr;  ///< device scratch of sample_rows_workspace_bytes(rows, vocab) (GPU only)
};

/// Bytes of device scratch sample_rows_cuda needs for `rows` rows of `vocab` logits.
size_t sample_rows_workspace_bytes(int64_t rows, int64_t vocab);

/// On the device (every pointer a device pointer); `stream` is a cudaStream_t.
void sample_rows_cuda(const sample_rows_args& a, void* stream);
/// The reference on the host (every pointer a host pointer; bf16 logits as raw uint16 bits).
void sample_rows_cpu(const sample_rows_args& a);

/// Scoring given tokens (the trainer's log-probs): per row the log-prob z[target] - lse and the
/// entropy, reduced over the same slices in the same order as sample_rows (so for equal logits and
/// temperature, the log-prob of a token equals the one the sampler recorded for it, bit for bit),
/// and lse itself for a backward.
struct score_rows_args {
  const void* logits = nullptr;  ///< [rows, vocab] with row stride `ld` (elements)
  bool bf16 = true;              ///< logits are bf16 (else fp32)
  int64_t rows = 0, vocab = 0, ld = 0;
  float temperature = 1.f;          ///< > 0, every row
  const int64_t* target = nullptr;  ///< [rows], each in [0, vocab) (else the log-prob is NaN)
  float* logprob = nullptr;         ///< out [rows]
  float* entropy = nullptr;         ///< out [rows]
  float* lse = nullptr;             ///< out [rows] or null
  void* workspace = nullptr;        ///< sample_rows_workspace_bytes(rows, vocab) (GPU only)
};
void score_rows_cuda(const score_rows_args& a, void* stream);
void score_rows_cpu(const score_rows_args& a);

}  // namespace milesrt::kernels
