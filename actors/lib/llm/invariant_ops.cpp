#include "actors/lib/llm/invariant_ops.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <cstdint>

#include "actors/lib/llm/device.hpp"
#include "kernels/attention/invariant_attention.hpp"
#include "kernels/gemm/invariant_gemm.hpp"
#include "kernels/train/train_kernels.hpp"

namespace milesrt::llm::invariant_ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kHeadDim = 128;

bool aligned16(const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; }

/// Rows of x as the GEMM reads them: unit column stride, a row stride that is a multiple of 8
/// and at least the row, 16-byte aligned (else a fresh contiguous copy: the same values).
at::Tensor gemm_rows(const at::Tensor& x) {
  const bool ok =
      x.stride(1) == 1 && x.stride(0) >= x.size(1) && x.stride(0) % 8 == 0 && aligned16(x);
  if (ok) return x;
  return x.clone(at::MemoryFormat::Contiguous);  // fresh: row stride = row, aligned
}

/// One attention call of kernels/attention over host-described keys.
/// Softmax's scale of head size 128 (the forward's and the backward's).
double attention_scale() { return 1.0 / std::sqrt(static_cast<double>(kHeadDim)); }

void run_attention(kernels::invariant_attention_args a, const at::Tensor& q, const at::Tensor& out,
                   float* lse) {
  a.q = q.data_ptr();
  a.out = out.data_ptr();
  a.lse = lse;
  a.rows = q.size(0);
  a.heads = q.size(1);
  a.scale = static_cast<float>(attention_scale());
  kernels::invariant_attention_cuda(a, current_cuda_stream());
}

struct packed_attention_fn : public torch::autograd::Function<packed_attention_fn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, const at::Tensor& seq, const at::Tensor& pos,
                            const at::Tensor& cu, int64_t max_len) {
    auto qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
    auto out = at::empty_like(qc);
    auto lse = at::empty({qc.size(1), qc.size(0)}, qc.options().dtype(at::kFloat));
    kernels::invariant_attention_args a;
    a.k = kc.data_ptr();
    a.v = vc.data_ptr();
    a.seq = seq.data_ptr<int32_t>();
    a.pos = pos.data_ptr<int32_t>();
    a.kv_start = cu.data_ptr<int32_t>();  // its first entries: each sequence's first row
    a.kv_heads = kc.size(1);
    run_attention(a, qc, out, lse.data_ptr<float>());
    ctx->save_for_backward({qc, kc, vc, out, lse, cu});
    ctx->saved_data["max_len"] = max_len;
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    const int64_t max_len = ctx->saved_data["max_len"].toInt();
    // No dropout: flash attention's random state is not read.
    auto rng = at::zeros({2}, s[0].options().dtype(at::kLong));
    auto unused = at::empty({0}, s[0].options().dtype(at::kLong));
    auto [dq, dk, dv] = at::_flash_attention_backward(
        grads[0].contiguous(), s[0], s[1], s[2], s[3], s[4], s[5], s[5], max_len, max_len, 0.0,
        /*is_causal=*/true, rng, unused, attention_scale());
    return {dq, dk, dv, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

std::string problem(const at::Device& device, at::ScalarType dtype, bool lora, int64_t head_dim) {
  if (!device.is_cuda()) return {};  // the CPU path is batch-invariant by construction
  if (!kernels::train_kernels_available())
    return "this build has no CUDA kernels (the mode's batch-invariant kernels); "
           "use device = cpu";
  if (dtype != at::kBFloat16) return "on cuda the mode needs dtype = bf16";
  if (lora) return "on cuda the mode is not built for LoRA adapters";
  if (head_dim != 0 && head_dim != kHeadDim)
    return "on cuda the mode needs head_dim 128 (the model has " + std::to_string(head_dim) + ")";
  return {};
}

at::Tensor mm(const at::Tensor& x, const at::Tensor& w) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kBFloat16 && w.scalar_type() == at::kBFloat16,
              "the batch-invariant GEMM is bf16 on CUDA");
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1),
              "the batch-invariant GEMM needs x [m, k] and w [n, k]");
  const int64_t m = x.size(0), n = w.size(0), k = x.size(1);
  TORCH_CHECK(k % 8 == 0,
              "the batch-invariant GEMM needs an inner size that is a multiple of 8 (got ", k, ")");
  auto xr = gemm_rows(x);
  // n rounded up to 8 (a small vocabulary): the weight gets zero rows, the output is cut.
  const int64_t n8 = (n + 7) / 8 * 8;
  at::Tensor wr = w;
  if (n8 != n)
    wr = at::cat({w, at::zeros({n8 - n, k}, w.options())}, 0);
  else if (!(w.stride(1) == 1 && w.stride(0) == k && aligned16(w)))
    wr = w.clone(at::MemoryFormat::Contiguous);
  auto y = at::empty({m, n8}, x.options());
  kernels::invariant_gemm_bf16_cuda(xr.data_ptr(), xr.stride(0), wr.data_ptr(), y.data_ptr(), n8, m,
                                    n8, k, current_cuda_stream());
  return n8 == n ? y : y.narrow(1, 0, n).contiguous();
}

packed_keys make_packed_keys(const std::vector<int64_t>& lengths, const at::Tensor& cu_seqlens,
                             int64_t max_len) {
  packed_keys b;
  b.cu_seqlens = cu_seqlens;
  b.max_len = max_len;
  int64_t T = 0;
  for (auto n : lengths) T += n;
  // One int32 buffer, one copy: seq | pos.
  auto host = at::empty({2 * T}, at::TensorOptions().dtype(at::kInt).pinned_memory(true));
  int32_t* seq = host.data_ptr<int32_t>();
  int32_t* pos = seq + T;
  int64_t row = 0;
  for (size_t s = 0; s < lengths.size(); ++s) {
    for (int64_t j = 0; j < lengths[s]; ++j, ++row) {
      seq[row] = static_cast<int32_t>(s);
      pos[row] = static_cast<int32_t>(j);
    }
  }
  auto dev = host.to(cu_seqlens.device(), /*non_blocking=*/true);
  b.seq = dev.narrow(0, 0, T);
  b.pos = dev.narrow(0, T, T);
  return b;
}

at::Tensor packed_attention(const packed_keys& b, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v) {
  TORCH_CHECK(q.size(-1) == kHeadDim, "the batch-invariant attention needs head_dim 128");
  return packed_attention_fn::apply(q, k, v, b.seq, b.pos, b.cu_seqlens, b.max_len);
}

at::Tensor paged_attention(const at::Tensor& q, const at::Tensor& k_cache,
                           const at::Tensor& v_cache, const at::Tensor& pages,
                           const at::Tensor& page_indptr, const at::Tensor& seq,
                           const at::Tensor& pos, int64_t block_size) {
  TORCH_CHECK(q.size(-1) == kHeadDim, "the batch-invariant attention needs head_dim 128");
  auto qc = q.contiguous();
  auto out = at::empty_like(qc);
  kernels::invariant_attention_args a;
  a.k = k_cache.data_ptr();
  a.v = v_cache.data_ptr();
  a.seq = seq.defined() ? seq.data_ptr<int32_t>() : nullptr;
  a.pos = pos.data_ptr<int32_t>();
  a.block_table = pages.data_ptr<int32_t>();
  a.page_indptr = page_indptr.data_ptr<int32_t>();
  a.block_size = block_size;
  a.kv_heads = k_cache.size(-2);
  run_attention(a, qc, out, nullptr);
  return out;
}

}  // namespace milesrt::llm::invariant_ops
