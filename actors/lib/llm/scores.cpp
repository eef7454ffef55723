// Log-probs and entropies of target tokens over the full vocabulary, a chunk of rows at a time
// (decoder::score_rows, score_sequences, logits_rows). The CPU path is plain ATen operations that
// autograd differentiates (the reference); on CUDA one autograd function keeps only each row's
// log-sum-exp and entropy and computes a chunk's logits again in its backward, so no
// [tokens x vocab] tensor outlives a chunk. In bf16 that function is two kernels: the sampler's
// own reduction scores a chunk's bf16 logits (a token's log-prob is computed as the engine's
// sampler computed it), and one pass turns the logits into their gradient in place.

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

#include "actors/lib/llm/device.hpp"
#include "actors/lib/llm/invariant_ops.hpp"
#include "actors/lib/llm/model.hpp"
#include "actors/lib/llm/row_ops.hpp"
#include "kernels/sampling/sampler.hpp"
#include "kernels/train/train_kernels.hpp"

namespace milesrt::llm {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// Rows per chunk on the GPU: at least `chunk`, and enough that the head's gradient GEMM
/// ([vocab, rows] x [rows, d], accumulated in fp32) is not bound by re-reading its output.
/// (At most 65,535: the kernels' grid rows.)
int64_t gpu_chunk_rows(int64_t chunk, int64_t vocab) {
  return std::min<int64_t>(
      65535, std::max<int64_t>(chunk, (int64_t{1} << 28) / std::max<int64_t>(vocab, 1)));
}

/// Adds an fp32 gradient into `head`'s accumulated one where it has one (no bf16 copy and second
/// addition); else returns it in head's dtype.
at::Tensor head_gradient(const at::Tensor& head, const at::Tensor& grad_fp32) {
  auto g = head.grad();
  if (g.defined() && g.is_contiguous() && g.sizes() == grad_fp32.sizes()) {
    g.add_(grad_fp32);
    return at::Tensor();
  }
  return grad_fp32.to(head.scalar_type());
}

/// What both scoring functions keep for their backward, and the gradients it receives as fp32
/// rows (zeros for an output that got none).
struct saved_scores {
  at::Tensor hidden, head, targets, lse, entropy, g_lp, g_ent;
  double temperature = 1;
  int64_t chunk = 1;

  static void save(AutogradContext* ctx, const at::Tensor& hidden, const at::Tensor& head,
                   const at::Tensor& targets, const at::Tensor& lse, const at::Tensor& entropy,
                   double temperature, int64_t chunk) {
    ctx->save_for_backward({hidden, head, targets, lse, entropy.clone()});
    ctx->saved_data["temperature"] = temperature;
    ctx->saved_data["chunk"] = chunk;
  }
  static saved_scores load(AutogradContext* ctx, const variable_list& grads) {
    const auto v = ctx->get_saved_variables();
    saved_scores s;
    s.hidden = v[0];
    s.head = v[1];
    s.targets = v[2];
    s.lse = v[3];
    s.entropy = v[4];
    s.temperature = ctx->saved_data["temperature"].toDouble();
    s.chunk = ctx->saved_data["chunk"].toInt();
    auto rows = [&](const at::Tensor& g) {
      return g.defined() ? g.to(at::kFloat).contiguous()
                         : at::zeros({s.hidden.size(0)}, s.hidden.options().dtype(at::kFloat));
    };
    s.g_lp = rows(grads[0]);
    s.g_ent = rows(grads[1]);
    return s;
  }
};

/// A chunk's bf16 logits: the head's GEMM, the batch-invariant one in the true on-policy mode.
at::Tensor chunk_logits(const at::Tensor& h, const at::Tensor& head, bool invariant) {
  return invariant ? invariant_ops::mm(h, head) : at::mm(h, head.t());
}

/// bf16 logits on CUDA: the two kernels of kernels/sampling and kernels/train.
struct fused_scores_fn : public torch::autograd::Function<fused_scores_fn> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& hidden,
                               const at::Tensor& head, const at::Tensor& targets,
                               double temperature, int64_t chunk, bool invariant) {
    const int64_t n = hidden.size(0), vocab = head.size(0);
    auto opts = hidden.options().dtype(at::kFloat);
    auto logprobs = at::empty({n}, opts), entropy = at::empty({n}, opts),
         lse = at::empty({n}, opts);
    auto ws = at::empty({int64_t(kernels::sample_rows_workspace_bytes(std::min(chunk, n), vocab))},
                        hidden.options().dtype(at::kByte));
    for (int64_t from = 0; from < n; from += chunk) {
      const int64_t m = std::min(chunk, n - from);
      auto z = chunk_logits(hidden.narrow(0, from, m), head, invariant);  // [m, vocab] bf16
      kernels::score_rows_args a;
      a.logits = z.data_ptr();
      a.rows = m;
      a.vocab = a.ld = vocab;
      a.temperature = static_cast<float>(temperature);
      a.target = targets.data_ptr<int64_t>() + from;
      a.logprob = logprobs.data_ptr<float>() + from;
      a.entropy = entropy.data_ptr<float>() + from;
      a.lse = lse.data_ptr<float>() + from;
      a.workspace = ws.data_ptr();
      kernels::score_rows_cuda(a, current_cuda_stream());
    }
    saved_scores::save(ctx, hidden, head, targets, lse, entropy, temperature, chunk);
    ctx->saved_data["invariant"] = invariant;
    return {logprobs, entropy};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = saved_scores::load(ctx, grads);
    const bool invariant = ctx->saved_data["invariant"].toBool();
    const auto &hidden = s.hidden, &head = s.head, &targets = s.targets, &lse = s.lse,
               &entropy = s.entropy, &g_lp = s.g_lp, &g_ent = s.g_ent;
    const double temperature = s.temperature;
    const int64_t chunk = s.chunk, n = hidden.size(0), vocab = head.size(0);
    auto grad_hidden = at::empty_like(hidden);
    const bool want_head = ctx->needs_input_grad(1);
    auto grad_head =
        want_head ? at::empty(head.sizes(), head.options().dtype(at::kFloat)) : at::Tensor();
    for (int64_t from = 0; from < n; from += chunk) {
      const int64_t m = std::min(chunk, n - from);
      auto h = hidden.narrow(0, from, m);
      auto z = chunk_logits(h, head, invariant);  // the logits again, then their gradient in place
      kernels::logprob_backward_cuda(z.data_ptr(), m, vocab, vocab,
                                     targets.data_ptr<int64_t>() + from,
                                     lse.data_ptr<float>() + from, entropy.data_ptr<float>() + from,
                                     g_lp.data_ptr<float>() + from, g_ent.data_ptr<float>() + from,
                                     static_cast<float>(temperature), current_cuda_stream());
      auto gh = grad_hidden.narrow(0, from, m);
      at::mm_out(gh, z, head);
      if (want_head)
        at::addmm_out(grad_head, grad_head, z.t(), h, at::kFloat, /*beta=*/from == 0 ? 0 : 1);
    }
    return {grad_hidden,  want_head ? head_gradient(head, grad_head) : at::Tensor(),
            at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor()};
  }
};

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
    saved_scores::save(ctx, hidden, head, targets, lse, entropy, temperature, chunk);
    return {logprobs, entropy};
  }

  // d logp_t / dz_j = [j = t] - p_j;  d H / dz_j = -p_j (z_j - lse + H);  z = logits / temperature.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = saved_scores::load(ctx, grads);
    const auto &hidden = s.hidden, &head = s.head, &targets = s.targets, &lse = s.lse,
               &entropy = s.entropy, &g_lp = s.g_lp, &g_ent = s.g_ent;
    const double temperature = s.temperature;
    const int64_t chunk = s.chunk, n = hidden.size(0);
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
    return {grad_hidden, ctx->needs_input_grad(1) ? head_gradient(head, grad_head) : at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

/// Logits of padded rows (a multiple of 8), kept padded so that every later operation sees the
/// same layout in both paths.
at::Tensor padded_head_logits(const at::Tensor& hidden, const at::Tensor& head, double temperature,
                              bool invariant) {
  if (hidden.is_cuda()) return chunk_logits(hidden, head, invariant).to(at::kFloat) / temperature;
  return row_ops::blocked_mm(row_ops::pad_rows(hidden), head).to(at::kFloat) / temperature;
}

at::Tensor decoder::logits_rows(const at::Tensor& hidden, double temperature) const {
  const auto& head = lm_head();
  return padded_head_logits(hidden, head, temperature, batch_invariant_)
      .narrow(0, 0, hidden.size(0));
}

token_scores decoder::score_rows(const at::Tensor& hidden, const at::Tensor& targets,
                                 double temperature, int64_t chunk) const {
  const auto& head = config_.tie_word_embeddings ? params_->get("model.embed_tokens.weight")
                                                 : params_->get("lm_head.weight");
  return chunked_scores(hidden, head, targets, temperature, chunk, batch_invariant_);
}

std::vector<token_scores> decoder::score_sequences(const std::vector<std::vector<int64_t>>& seqs,
                                                   double temperature, int64_t chunk,
                                                   forward_result* details,
                                                   bool adapters_off) const {
  std::vector<segment> segments;
  std::vector<int64_t> rows, targets;
  int64_t row = 0;
  for (const auto& s : seqs) {
    segments.push_back({s, 0, nullptr});
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      rows.push_back(row + static_cast<int64_t>(i));
      targets.push_back(s[i + 1]);
    }
    row += static_cast<int64_t>(s.size());
  }
  forward_options fo;
  fo.adapters_off = adapters_off;
  auto fr = forward(segments, fo);
  auto picked = fr.hidden.index_select(0, at::tensor(rows, at::kLong).to(device_));
  auto scores = score_rows(picked, at::tensor(targets, at::kLong), temperature, chunk);
  std::vector<token_scores> out;
  int64_t at_row = 0;
  for (const auto& s : seqs) {
    const int64_t n = s.size() > 1 ? static_cast<int64_t>(s.size()) - 1 : 0;
    out.push_back({scores.logprobs.narrow(0, at_row, n), scores.entropy.narrow(0, at_row, n)});
    at_row += n;
  }
  if (details) *details = std::move(fr);
  return out;
}

token_scores chunked_scores(const at::Tensor& hidden, const at::Tensor& head,
                            const at::Tensor& targets, double temperature, int64_t chunk,
                            bool invariant) {
  TORCH_CHECK(temperature > 0, "temperature must be positive");
  TORCH_CHECK(chunk > 0, "chunk must be positive");
  const int64_t n = hidden.size(0);
  auto tgt = targets.to(hidden.device()).to(at::kLong);
  if (hidden.is_cuda()) {
    if (n == 0) {
      auto empty = at::empty({0}, hidden.options().dtype(at::kFloat));
      return {empty, empty};
    }
    const int64_t rows = gpu_chunk_rows(chunk, head.size(0));
    auto out =
        hidden.scalar_type() == at::kBFloat16 && head.scalar_type() == at::kBFloat16 &&
                kernels::train_kernels_available()
            ? fused_scores_fn::apply(hidden, head, tgt.contiguous(), temperature, rows, invariant)
            : chunked_scores_fn::apply(hidden, head, tgt, temperature, rows);
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
