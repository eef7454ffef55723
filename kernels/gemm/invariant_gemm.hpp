#pragma once
/// A GEMM whose rows do not depend on the other rows of the call (the batch-invariant GEMM of the
/// true on-policy mode): y[M, N] = x[M, K] · w[N, K]^T, bf16 in and out, fp32 accumulation.
///
/// cuBLAS picks its kernel, and may split K, by the whole problem shape, so a row's result changes
/// with how many rows came with it. Here one cuBLASLt algorithm per (device, N, K) is chosen once:
/// the heuristic's best for kInvariantPlanRows rows (then for 4,096) among the algorithms that need
/// no workspace and no reduction (no split-K), with split-K pinned to 1, that serves every row
/// count from 1 to 32,768 (checked at a few); it is reused for every M, so each output element is
/// one thread block's sum over K in the algorithm's fixed order, whatever M is. An M the pinned
/// algorithm cannot serve is refused with an error naming the shape, never computed another way.
/// No ATen here: raw device pointers and a stream.

#include <cstdint>

namespace milesrt::kernels {

/// The number of rows the algorithm of a (N, K) is chosen for.
constexpr int64_t kInvariantPlanRows = 256;

/// x: [m, k] row-major with row stride ldx (elements); w: [n, k] row-major (contiguous); y: [m, n]
/// row-major with row stride ldy. Every pointer 16-byte aligned, ldx and ldy multiples of 8.
void invariant_gemm_bf16_cuda(const void* x, int64_t ldx, const void* w, void* y, int64_t ldy,
                              int64_t m, int64_t n, int64_t k, void* stream);

/// The reference on the host: fp32 products accumulated in fp32 over k in order, rounded to bf16.
/// (The GPU's tensor cores sum in another order: equal within rounding, not bit for bit.)
void invariant_gemm_bf16_cpu(const uint16_t* x, int64_t ldx, const uint16_t* w, uint16_t* y,
                             int64_t ldy, int64_t m, int64_t n, int64_t k);

}  // namespace milesrt::kernels
