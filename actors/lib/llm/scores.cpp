// Log-probs and entropies of target tokens over the full vocabulary, a chunk of rows at a time
// (decoder::score_rows). The CPU path is plain ATen operations that autograd differentiates (the
// reference); on CUDA one autograd function keeps only each row's log-sum-exp and entropy and
// computes a chunk's logits again in its backward, so no [tokens x vocab] fp32 tensor outlives a
// chunk.

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

#include "actors/lib/llm/model.hpp"

namespace milesrt::llm {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// Rows per chunk on the GPU: at least `chunk`, and enough that the head's gradient GEMM
/// ([vocab, rows] x [rows, d], accumulated in fp32) is not bound by re-reading its output.
int64_t gpu_chunk_rows(int64_t chunk, int64_t vocab) {
  return std::max<int64_t>(chunk, (int64_t{1} << 28) / std::max<int64_t>(vocab, 1));
}

struct chunked_scores_fn : public torch::autograd::Function<chunked_scores_fn> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& hidden,
                               const at::Tensor& head, const at::Tensor& targets,
                               double temperature, int64_t chunk) {
    const int64_t n = hidden.size(0);
    auto opts = hidden.options().dtype(at::kFloat);
    auto logprobs = at::empty({n}, opts), entropy = at::empty({n}, opts),
         lse = at::empty({n}, opts);
    for (int64_t from = 0; from < n; from += chunk) {
      const int64_t m = std::min(chunk, n - from);
      auto z = padded_head_logits(hidden.narrow(0, from, m), head, temperature);  // [m, vocab] fp32
      auto l = at::logsumexp(z, -1);
      auto p = (z - l.unsqueeze(1)).exp_();
      lse.narrow(0, from, m).copy_(l);
      logprobs.narrow(0, from, m)
          .copy_(z.gather(1, targets.narrow(0, from, m).unsqueeze(1)).squeeze(1) - l);
      entropy.narrow(0, from, m).copy_(l - (p * z).sum(-1));
    }
    ctx->save_for_backward({hidden, head, targets, lse, entropy.clone()});
    ctx->saved_data["temperature"] = temperature;
    ctx->saved_data["chunk"] = chunk;
    return {logprobs, entropy};
  }

  // d logp_t / dz_j = [j = t] - p_j;  d H / dz_j = -p_j (z_j - lse + H);  z = logits / temperature.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &hidden = saved[0], &head = saved[1], &targets = saved[2], &lse = saved[3],
               &entropy = saved[4];
    const double temperature = ctx->saved_data["temperature"].toDouble();
    const int64_t chunk = ctx->saved_data["chunk"].toInt();
    const int64_t n = hidden.size(0);
    auto opts = hidden.options().dtype(at::kFloat);
    auto g_lp = grads[0].defined() ? grads[0].to(at::kFloat) : at::zeros({n}, opts);
    auto g_ent = grads[1].defined() ? grads[1].to(at::kFloat) : at::zeros({n}, opts);
    auto grad_hidden = at::empty_like(hidden);
    at::Tensor grad_head = at::zeros(head.sizes(), head.options().dtype(at::kFloat));
    for (int64_t from = 0; from < n; from += chunk) {
      const int64_t m = std::min(chunk, n - from);
      auto h = hidden.narrow(0, from, m);
      auto z = padded_head_logits(h, head, temperature);
      auto l = lse.narrow(0, from, m).unsqueeze(1);
      auto glp = g_lp.narrow(0, from, m).unsqueeze(1);
      auto gent = g_ent.narrow(0, from, m).unsqueeze(1);
      auto p = (z - l).exp();
      // gz = -p (g_lp + g_ent (z - lse + H)) + g_lp [j = t], then / temperature for the logits.
      auto gz = z.sub_(l)
                    .add_(entropy.narrow(0, from, m).unsqueeze(1))
                    .mul_(gent)
                    .add_(glp)
                    .mul_(p)
                    .neg_();
      gz.scatter_add_(1, targets.narrow(0, from, m).unsqueeze(1), glp);
      auto gl = gz.div_(temperature).to(head.scalar_type());
      grad_hidden.narrow(0, from, m).copy_(at::mm(gl, head));
      at::addmm_out(grad_head, grad_head, gl.t(), h, at::kFloat);
    }
    return {grad_hidden, grad_head.to(head.scalar_type()), at::Tensor(), at::Tensor(),
            at::Tensor()};
  }
};

}  // namespace

token_scores chunked_scores(const at::Tensor& hidden, const at::Tensor& head,
                            const at::Tensor& targets, double temperature, int64_t chunk) {
  TORCH_CHECK(temperature > 0, "temperature must be positive");
  TORCH_CHECK(chunk > 0, "chunk must be positive");
  const int64_t n = hidden.size(0);
  auto tgt = targets.to(hidden.device()).to(at::kLong);
  if (hidden.is_cuda()) {
    if (n == 0) {
      auto empty = at::empty({0}, hidden.options().dtype(at::kFloat));
      return {empty, empty};
    }
    auto out = chunked_scores_fn::apply(hidden, head, tgt, temperature,
                                        gpu_chunk_rows(chunk, head.size(0)));
    return {out[0], out[1]};
  }
  std::vector<at::Tensor> lps, ents;
  for (int64_t from = 0; from < n; from += chunk) {
    const int64_t m = std::min(chunk, n - from);
    auto logits =
        padded_head_logits(hidden.narrow(0, from, m), head, temperature);  // [m+pad, vocab]
    auto logp = at::log_softmax(logits, -1);
    auto t = tgt.narrow(0, from, m);
    if (logits.size(0) > m) t = at::cat({t, at::zeros({logits.size(0) - m}, t.options())});
    lps.push_back(logp.gather(1, t.unsqueeze(1)).squeeze(1).narrow(0, 0, m));
    ents.push_back((-(logp.exp() * logp).sum(-1)).narrow(0, 0, m));
  }
  if (lps.empty()) {
    auto empty = at::empty({0}, hidden.options().dtype(at::kFloat));
    return {empty, empty};
  }
  return {at::cat(lps), at::cat(ents)};
}

}  // namespace milesrt::llm
