#include "actors/lib/serving/device_sampling.hpp"

#include <ATen/ATen.h>

#include <cstring>
#include <limits>

#include "actors/lib/llm/device.hpp"
#include "actors/lib/llm/invariant_ops.hpp"
#include "kernels/sampling/sampler.hpp"

namespace milesrt::serving {

uint64_t sample_stream(uint64_t seed, int64_t index) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(index) + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

namespace {

/// The logits of rows of hidden states [S, d]: [S, vocab] in bf16 or fp32 (what the sampler reads).
at::Tensor head_logits(const llm::decoder& model, const at::Tensor& hidden) {
  auto logits = model.batch_invariant() && hidden.is_cuda()
                    ? llm::invariant_ops::mm(hidden, model.lm_head())
                    : at::mm(hidden, model.lm_head().t());
  if (logits.scalar_type() != at::kBFloat16 && logits.scalar_type() != at::kFloat)
    logits = logits.to(at::kFloat);
  return logits;
}

/// The sampler kernel over logits [S, vocab] (see sample_rows_device).
void sample_logits(const at::Tensor& logits, const at::Tensor& temperature, const at::Tensor& seeds,
                   const at::Tensor& positions, const at::Tensor& min_kept, at::Tensor& token,
                   at::Tensor& result) {
  const int64_t S = logits.size(0);
  kernels::sample_rows_args a;
  a.logits = logits.data_ptr();
  a.bf16 = logits.scalar_type() == at::kBFloat16;
  a.rows = S;
  a.vocab = logits.size(1);
  a.ld = logits.stride(0);
  a.temperature = temperature.data_ptr<float>();
  a.min_kept = min_kept.defined() ? min_kept.data_ptr<float>() : nullptr;
  a.seed = reinterpret_cast<const uint64_t*>(seeds.data_ptr<int64_t>());
  a.position = positions.data_ptr<int64_t>();
  a.token = token.data_ptr<int64_t>();
  a.logprob = result.data_ptr<float>();
  a.entropy = result.data_ptr<float>() + S;
  // Scratch of the slices' states: from the caching allocator (in a captured step, from the
  // graph's pool), freed when the step is done.
  auto workspace =
      at::empty({static_cast<int64_t>(kernels::sample_rows_workspace_bytes(S, a.vocab))},
                logits.options().dtype(at::kByte));
  a.workspace = workspace.data_ptr();
  kernels::sample_rows_cuda(a, llm::current_cuda_stream());
}

}  // namespace

void sample_rows_device(const llm::decoder& model, const at::Tensor& hidden,
                        const at::Tensor& temperature, const at::Tensor& seeds,
                        const at::Tensor& positions, const at::Tensor& min_kept, at::Tensor& token,
                        at::Tensor& result) {
  sample_logits(head_logits(model, hidden), temperature, seeds, positions, min_kept, token, result);
}

std::vector<device_sample_result> sample_on_device(
    const llm::decoder& model, const at::Tensor& hidden,
    const std::vector<device_sample_request>& requests, bool entropy) {
  const int64_t S = static_cast<int64_t>(requests.size());
  std::vector<device_sample_result> out(S);
  if (S == 0) return out;
  const auto device = hidden.device();
  // Host inputs in two page-locked buffers, one copy each: int64 rows | seeds | positions | top-k,
  // and float temperature | top-p.
  auto ints = at::empty({4 * S}, at::TensorOptions().dtype(at::kLong).pinned_memory(true));
  auto floats = at::empty({2 * S}, at::TensorOptions().dtype(at::kFloat).pinned_memory(true));
  int64_t* ip = ints.data_ptr<int64_t>();
  float* fp = floats.data_ptr<float>();
  bool restricted = false;
  for (int64_t i = 0; i < S; ++i) {
    const auto& r = requests[i];
    ip[i] = r.row;
    ip[S + i] = static_cast<int64_t>(r.seed);
    ip[2 * S + i] = r.position;
    ip[3 * S + i] = r.top_k;
    fp[i] = static_cast<float>(r.temperature);
    fp[S + i] = static_cast<float>(r.top_p);
    restricted = restricted || r.top_k > 0 || r.top_p < 1.0;
  }
  auto dints = ints.to(device, /*non_blocking=*/true);
  auto dfloats = floats.to(device, /*non_blocking=*/true);
  auto rows = dints.narrow(0, 0, S);
  auto seeds = dints.narrow(0, S, S);
  auto positions = dints.narrow(0, 2 * S, S);
  auto temperature = dfloats.narrow(0, 0, S);

  // One GEMM for the rows that sample; the thresholds and the sampler read the same logits.
  auto logits = head_logits(model, hidden.index_select(0, rows));
  at::Tensor min_kept;
  if (restricted) {
    // The smallest kept z of each row: top-k keeps k tokens, top-p the fewest whose probability
    // reaches p (the token that crosses it included), as the CPU engine does.
    auto z = logits.to(at::kFloat) / temperature.unsqueeze(1);
    const int64_t V = z.size(1);
    auto sorted = std::get<0>(z.sort(-1, /*descending=*/true));
    auto probs = at::softmax(sorted, -1);
    auto before = probs.cumsum(-1) - probs;
    auto top_p = dfloats.narrow(0, S, S);
    auto keep = (before < top_p.unsqueeze(1)).sum(-1);
    auto top_k = dints.narrow(0, 3 * S, S);
    keep = at::where(top_k > 0, at::minimum(keep, top_k), keep).clamp(1, V);
    min_kept = sorted.gather(1, (keep - 1).unsqueeze(1)).squeeze(1);
    auto open = at::logical_and(top_k <= 0, top_p >= 1.0f);
    min_kept =
        at::where(open, at::full_like(min_kept, -std::numeric_limits<float>::infinity()), min_kept)
            .contiguous();
  }
  auto token = at::empty({S}, dints.options());
  auto result = at::empty({2 * S}, dfloats.options());  // log-probs | entropies
  sample_logits(logits, temperature, seeds, positions, min_kept, token, result);
  // One copy back: ids (exact in double up to 2^53) and the floats.
  auto host = at::cat({token.to(at::kDouble), result.to(at::kDouble)}).to(at::kCPU);
  const double* h = host.data_ptr<double>();
  for (int64_t i = 0; i < S; ++i) {
    out[i].token = static_cast<int64_t>(h[i]);
    out[i].logprob = static_cast<float>(h[S + i]);
    out[i].entropy = entropy ? static_cast<float>(h[2 * S + i]) : 0.f;
  }
  return out;
}

}  // namespace milesrt::serving
