// The invariant GEMM on the GPU (invariant_gemm.hpp): cuBLASLt with one pinned algorithm per
// (device, N, K).
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/gemm/invariant_gemm.hpp"

namespace milesrt::kernels {
namespace {

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("invariant GEMM: ") + what +
                             " failed: " + cublasLtGetStatusString(s));
}

/// One handle per host thread (a handle is not shared between threads that may call at once).
cublasLtHandle_t handle() {
  thread_local struct owned {
    cublasLtHandle_t h = nullptr;
    owned() { check(cublasLtCreate(&h), "cublasLtCreate"); }
    ~owned() { cublasLtDestroy(h); }
  } o;
  return o.h;
}

/// The descriptors of one call: row-major y[m, n] = x[m, k] w[n, k]^T is, column-major,
/// y^T[n, m] = w^T[n, k] x^T[k, m] with w transposed: A = w (k x n, ld k, op T), B = x (k x m,
/// ld ldx), C = D = y (n x m, ld ldy).
struct call {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  call(int64_t m, int64_t n, int64_t k, int64_t ldx, int64_t ldy) {
    check(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "MatmulDescCreate");
    const cublasOperation_t t = CUBLAS_OP_T, nt = CUBLAS_OP_N;
    check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)), "TRANSA");
    check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &nt, sizeof(nt)),
          "TRANSB");
    check(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, uint64_t(k), uint64_t(n), k), "layout w");
    check(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, uint64_t(k), uint64_t(m), ldx), "layout x");
    check(cublasLtMatrixLayoutCreate(&c, CUDA_R_16BF, uint64_t(n), uint64_t(m), ldy), "layout y");
  }
  ~call() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
  call(const call&) = delete;
  call& operator=(const call&) = delete;
};

/// The output's row stride the callers use: n rounded up to 8 (16-byte aligned rows).
int64_t padded(int64_t n) { return (n + 7) / 8 * 8; }

/// Whether `algo` serves m rows of (n, k), contiguous, without workspace.
bool serves(cublasLtMatmulAlgo_t algo, int64_t m, int64_t n, int64_t k) {
  call shape(m, n, k, k, padded(n));
  cublasLtMatmulHeuristicResult_t checked{};
  return cublasLtMatmulAlgoCheck(handle(), shape.op, shape.a, shape.b, shape.c, shape.c, &algo,
                                 &checked) == CUBLAS_STATUS_SUCCESS &&
         checked.workspaceSize == 0;
}

/// The heuristic's algorithms for m rows of (n, k) among those with no workspace and no
/// reduction, best first.
std::vector<cublasLtMatmulAlgo_t> candidates(int64_t m, int64_t n, int64_t k) {
  constexpr int kWanted = 16;
  call shape(m, n, k, k, padded(n));
  cublasLtMatmulPreference_t pref = nullptr;
  check(cublasLtMatmulPreferenceCreate(&pref), "PreferenceCreate");
  const uint64_t no_workspace = 0;
  const uint32_t no_reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
  cublasLtMatmulHeuristicResult_t found[kWanted] = {};
  int count = 0;
  cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &no_workspace, sizeof(no_workspace));
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                             &no_reduction, sizeof(no_reduction));
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulAlgoGetHeuristic(handle(), shape.op, shape.a, shape.b, shape.c, shape.c, pref,
                                       kWanted, found, &count);
  cublasLtMatmulPreferenceDestroy(pref);
  check(s, "AlgoGetHeuristic");
  std::vector<cublasLtMatmulAlgo_t> out;
  for (int i = 0; i < count; ++i) out.push_back(found[i].algo);
  return out;
}

/// The algorithm of a (device, n, k): the heuristic's best for kInvariantPlanRows rows (then for
/// more) whose split-K pinned to 1 serves every row count from 1 to 32,768 (checked at a few):
/// some algorithms the heuristic offers for 256 rows refuse 1,024.
cublasLtMatmulAlgo_t plan(int device, int64_t n, int64_t k) {
  static std::mutex mu;
  static std::map<std::tuple<int, int64_t, int64_t>, cublasLtMatmulAlgo_t> plans;
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(device, n, k);
  if (auto it = plans.find(key); it != plans.end()) return it->second;
  const int64_t probes[] = {1, 7, 64, kInvariantPlanRows, 1024, 4096, 32768};
  const uint32_t one = 1;
  for (int64_t rows : {kInvariantPlanRows, int64_t{4096}}) {
    for (auto algo : candidates(rows, n, k)) {
      if (cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one,
                                               sizeof(one)) != CUBLAS_STATUS_SUCCESS)
        continue;
      bool all = true;
      for (int64_t m : probes) all = all && serves(algo, m, n, k);
      if (!all) continue;
      plans.emplace(key, algo);
      return algo;
    }
  }
  throw std::runtime_error(
      "invariant GEMM: cuBLASLt offers no algorithm without split-K or workspace that serves 1 "
      "to 32768 rows for n = " +
      std::to_string(n) + ", k = " + std::to_string(k));
}

/// A checked call of one shape: its descriptors and the pinned algorithm, checked for its m.
struct prepared {
  call shape;
  cublasLtMatmulAlgo_t algo;
  prepared(int device, int64_t m, int64_t n, int64_t k, int64_t ldx, int64_t ldy)
      : shape(m, n, k, ldx, ldy), algo(plan(device, n, k)) {
    cublasLtMatmulHeuristicResult_t checked{};
    if (cublasLtMatmulAlgoCheck(handle(), shape.op, shape.a, shape.b, shape.c, shape.c, &algo,
                                &checked) != CUBLAS_STATUS_SUCCESS ||
        checked.workspaceSize > 0) {
      throw std::runtime_error("invariant GEMM: the algorithm pinned for n = " + std::to_string(n) +
                               ", k = " + std::to_string(k) +
                               " cannot serve m = " + std::to_string(m) + " rows");
    }
  }
};

/// This thread's prepared calls by (device, m, n, k, ldx, ldy): a decode step or a training step
/// repeats its shapes, so descriptors are built and checked once (at most kKept shapes are kept).
const prepared& prepared_call(int device, int64_t m, int64_t n, int64_t k, int64_t ldx,
                              int64_t ldy) {
  constexpr size_t kKept = 4096;
  using key_t = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t>;
  thread_local std::map<key_t, std::unique_ptr<prepared>> calls;
  const key_t key{device, m, n, k, ldx, ldy};
  if (auto it = calls.find(key); it != calls.end()) return *it->second;
  if (calls.size() >= kKept) calls.clear();
  auto made = std::make_unique<prepared>(device, m, n, k, ldx, ldy);
  return *calls.emplace(key, std::move(made)).first->second;
}

}  // namespace

void invariant_gemm_bf16_cuda(const void* x, int64_t ldx, const void* w, void* y, int64_t ldy,
                              int64_t m, int64_t n, int64_t k, void* stream) {
  if (m == 0 || n == 0) return;
  if (k <= 0 || ldx < k || ldy < n)
    throw std::invalid_argument("invariant GEMM: bad shape (k " + std::to_string(k) + ", ldx " +
                                std::to_string(ldx) + ", ldy " + std::to_string(ldy) + ")");
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess)
    throw std::runtime_error("invariant GEMM: no current CUDA device");
  const prepared& p = prepared_call(device, m, n, k, ldx, ldy);
  const float alpha = 1.f, beta = 0.f;
  check(
      cublasLtMatmul(handle(), p.shape.op, &alpha, w, p.shape.a, x, p.shape.b, &beta, y, p.shape.c,
                     y, p.shape.c, &p.algo, nullptr, 0, static_cast<cudaStream_t>(stream)),
      "Matmul");
}

}  // namespace milesrt::kernels
