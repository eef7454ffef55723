// The invariant GEMM on the GPU from CUTLASS's tensor-core kernels (invariant_gemm.hpp): every tile
// shape below walks K in the same order (tiles of 64, warps over the whole tile's K, mma.sync
// 16x8x16 steps in order) with no split-K, so an output element is the same sum of the same
// products in the same order whichever tile shape computes it, and whatever M is. The shape is
// picked by M for speed alone.
#include <cuda_runtime.h>
#include <cutlass/bfloat16.h>
#include <cutlass/epilogue/thread/linear_combination.h>
#include <cutlass/gemm/device/gemm.h>

#include <stdexcept>
#include <string>

#include "kernels/gemm/invariant_gemm.hpp"

namespace milesrt::kernels {
namespace {

using bf16 = cutlass::bfloat16_t;
constexpr int kTileK = 64;  // the same K walk in every shape: what makes them agree

// y[m, n] (row-major) = x[m, k] (row-major) * w[n, k]^T: w read as a column-major [k, n].
template <int TM, int TN, int WM, int WN, int Stages>
using gemm_t = cutlass::gemm::device::Gemm<
    bf16, cutlass::layout::RowMajor, bf16, cutlass::layout::ColumnMajor, bf16,
    cutlass::layout::RowMajor, float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<TM, TN, kTileK>, cutlass::gemm::GemmShape<WM, WN, kTileK>,
    cutlass::gemm::GemmShape<16, 8, 16>,
    cutlass::epilogue::thread::LinearCombination<bf16, 8, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, Stages>;

void check(cutlass::Status s, const char* what) {
  if (s != cutlass::Status::kSuccess)
    throw std::runtime_error(std::string("invariant GEMM: ") + what + ": " +
                             cutlassGetStatusString(s));
}

template <typename G>
void run(const void* x, int64_t ldx, const void* w, void* y, int64_t ldy, int64_t m, int64_t n,
         int64_t k, cudaStream_t stream) {
  auto* yp = static_cast<bf16*>(y);
  typename G::Arguments args({static_cast<int>(m), static_cast<int>(n), static_cast<int>(k)},
                             {static_cast<const bf16*>(x), ldx}, {static_cast<const bf16*>(w), k},
                             {yp, ldy}, {yp, ldy}, {1.f, 0.f});
  G gemm;
  check(gemm.can_implement(args), "the problem");
  check(gemm.initialize(args, nullptr, stream), "initialize");
  check(gemm.run(stream), "run");
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("invariant GEMM: ") + cudaGetErrorString(e));
}

}  // namespace

void invariant_gemm_bf16_cuda(const void* x, int64_t ldx, const void* w, void* y, int64_t ldy,
                              int64_t m, int64_t n, int64_t k, void* stream) {
  if (m == 0 || n == 0) return;
  if (k <= 0 || k % 8 != 0 || n % 8 != 0 || ldx < k || ldx % 8 != 0 || ldy < n || ldy % 8 != 0 ||
      m > (int64_t{1} << 31) - 1 || n > (int64_t{1} << 31) - 1 || k > (int64_t{1} << 31) - 1)
    throw std::invalid_argument("invariant GEMM: bad shape (m " + std::to_string(m) + ", n " +
                                std::to_string(n) + ", k " + std::to_string(k) + ", ldx " +
                                std::to_string(ldx) + ", ldy " + std::to_string(ldy) +
                                "; n, k and the strides must be multiples of 8)");
  auto s = static_cast<cudaStream_t>(stream);
  if (m <= 32)
    run<gemm_t<32, 32, 32, 32, 6>>(x, ldx, w, y, ldy, m, n, k, s);  // decode: many narrow tiles
  else if (m <= 256)
    run<gemm_t<64, 64, 32, 32, 4>>(x, ldx, w, y, ldy, m, n, k, s);
  else
    run<gemm_t<128, 128, 64, 64, 3>>(x, ldx, w, y, ldy, m, n, k, s);
}

}  // namespace milesrt::kernels
