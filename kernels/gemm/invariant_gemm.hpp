#pragma once
/// A GEMM whose rows do not depend on the other rows of the call (the batch-invariant GEMM of the
/// true on-policy mode): y[M, N] = x[M, K] · w[N, K]^T, bf16 in and out, fp32 accumulation.
///
/// cuBLAS picks its kernel, and may split K, by the whole problem shape, so a row's result changes
/// with how many rows came with it; pinning one cuBLASLt algorithm does not help (on an H100 no
/// algorithm without split-K serves 1 to 32,768 rows of the projections' shapes). Here CUTLASS's
/// tensor-core GEMM runs with tile shapes that all walk K the same way (tiles of 64, warps over the
/// whole tile's K, mma.sync steps of 16 in order) and never split K: each output element is the
/// same sum of the same products in the same order whichever tile computes it, whatever M is, by
/// construction. The tile shape is picked by M for speed alone. No ATen here: raw device pointers
/// and a stream.

#include <cstdint>

namespace milesrt::kernels {

/// x: [m, k] row-major with row stride ldx (elements); w: [n, k] row-major (contiguous); y: [m, n]
/// row-major with row stride ldy. Every pointer 16-byte aligned; n, k, ldx and ldy multiples of 8.
void invariant_gemm_bf16_cuda(const void* x, int64_t ldx, const void* w, void* y, int64_t ldy,
                              int64_t m, int64_t n, int64_t k, void* stream);

/// The reference on the host: fp32 products accumulated in fp32 over k in order, rounded to bf16.
/// (The GPU's tensor cores sum in another order: equal within rounding, not bit for bit.)
void invariant_gemm_bf16_cpu(const uint16_t* x, int64_t ldx, const uint16_t* w, uint16_t* y,
                             int64_t ldy, int64_t m, int64_t n, int64_t k);

}  // namespace milesrt::kernels
