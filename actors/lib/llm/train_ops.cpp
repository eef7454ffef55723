#include "actors/lib/llm/train_ops.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "actors/lib/llm/device.hpp"
#include "actors/lib/llm/invariant_ops.hpp"
#include "kernels/decoder/decoder_kernels.hpp"
#include "kernels/train/train_kernels.hpp"

namespace milesrt::llm::train_ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// Where a norm weight's gradient goes: {an fp32 row to return, or w's own accumulated bf16
/// gradient to add into}; neither when it is not wanted.
std::pair<at::Tensor, at::Tensor> dw_target(const at::Tensor& w, at::ScalarType dtype, bool want) {
  if (!want) return {};
  const auto& g = w.grad();
  if (g.defined() && g.is_contiguous() && g.scalar_type() == dtype) return {at::Tensor(), g};
  return {at::empty({w.numel()}, w.options().dtype(at::kFloat)), at::Tensor()};
}

/// The gradient of RMSNorm(x) * w (and, with dres, of the residual stream x itself) on the
/// kernels; dw goes straight into w's accumulated gradient where w has one (a parameter of the
/// flat buffer), else it is returned. Returns {dx, dw or undefined}.
std::pair<at::Tensor, at::Tensor> norm_backward(const at::Tensor& dy, const at::Tensor& x,
                                                const at::Tensor& w, const at::Tensor& dres,
                                                double eps, bool need_dw) {
  const int64_t cols = x.size(-1), rows = x.numel() / cols;
  auto dx = at::empty_like(x);
  auto ws = at::empty({kernels::rmsnorm_backward_workspace(rows, cols) / 4 + 1},
                      x.options().dtype(at::kFloat));
  auto [dw, acc] = dw_target(w, x.scalar_type(), need_dw);
  kernels::rmsnorm_backward_cuda(
      dy.data_ptr(), x.data_ptr(), w.contiguous().data_ptr(),
      dres.defined() ? dres.data_ptr() : nullptr, dx.data_ptr(),
      dw.defined() ? dw.data_ptr<float>() : nullptr, acc.defined() ? acc.data_ptr() : nullptr, rows,
      cols, static_cast<float>(eps), ws.data_ptr<float>(), current_cuda_stream());
  return {dx, dw.defined() ? dw.to(w.scalar_type()) : at::Tensor()};
}

struct rms_norm_fn : public torch::autograd::Function<rms_norm_fn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                            double eps) {
    auto xc = x.contiguous();
    auto y = at::empty_like(xc);
    const int64_t cols = xc.size(-1);
    kernels::add_rmsnorm_out_cuda(xc.data_ptr(), nullptr, nullptr, w.contiguous().data_ptr(),
                                  y.data_ptr(), xc.numel() / cols, cols, static_cast<float>(eps),
                                  current_cuda_stream());
    ctx->save_for_backward({xc, w});
    ctx->saved_data["eps"] = eps;
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto [dx, dw] = norm_backward(grads[0].contiguous(), saved[0], saved[1], at::Tensor(),
                                  ctx->saved_data["eps"].toDouble(), ctx->needs_input_grad(1));
    return {dx, dw, at::Tensor()};
  }
};

/// rope(RMSNorm(x) * w) per head of 128 (Qwen3's q/k norm and rotary embedding) in one pass.
struct qk_norm_rope_fn : public torch::autograd::Function<qk_norm_rope_fn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                            const at::Tensor& cos, const at::Tensor& sin, double eps) {
    auto xc = x.contiguous(), c = cos.contiguous(), s = sin.contiguous();
    auto out = at::empty_like(xc);
    kernels::qk_norm_rope_cuda(xc.data_ptr(), w.contiguous().data_ptr(), c.data_ptr(), s.data_ptr(),
                               out.data_ptr(), xc.size(0), xc.size(1), static_cast<float>(eps),
                               current_cuda_stream());
    ctx->save_for_backward({xc, w, c, s});
    ctx->saved_data["eps"] = eps;
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &w = saved[1];
    auto g = grads[0].contiguous();
    auto dx = at::empty_like(x);
    const int64_t rows = x.size(0), heads = x.size(1);
    auto ws = at::empty({kernels::rmsnorm_backward_workspace(rows * heads, x.size(2)) / 4 + 1},
                        x.options().dtype(at::kFloat));
    auto [dw, acc] = dw_target(w, x.scalar_type(), ctx->needs_input_grad(1));
    kernels::qk_norm_rope_backward_cuda(g.data_ptr(), x.data_ptr(), w.contiguous().data_ptr(),
                                        saved[2].data_ptr(), saved[3].data_ptr(), dx.data_ptr(),
                                        dw.defined() ? dw.data_ptr<float>() : nullptr,
                                        acc.defined() ? acc.data_ptr() : nullptr, rows, heads,
                                        static_cast<float>(ctx->saved_data["eps"].toDouble()),
                                        ws.data_ptr<float>(), current_cuda_stream());
    return {dx, dw.defined() ? dw.to(w.scalar_type()) : at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor()};
  }
};

/// {h + delta, RMSNorm(h + delta) * w} in one pass; backward: the stream's gradient joins the
/// norm's in one pass too, and goes to both h and delta.
struct add_rms_norm_fn : public torch::autograd::Function<add_rms_norm_fn> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& h, const at::Tensor& delta,
                               const at::Tensor& w, double eps) {
    ctx->set_materialize_grads(false);  // an unused sum (the last norm's) costs no zeros
    auto hc = h.contiguous(), dc = delta.contiguous();
    auto sum = at::empty_like(hc), y = at::empty_like(hc);
    const int64_t cols = hc.size(-1);
    kernels::add_rmsnorm_out_cuda(hc.data_ptr(), dc.data_ptr(), sum.data_ptr(),
                                  w.contiguous().data_ptr(), y.data_ptr(), hc.numel() / cols, cols,
                                  static_cast<float>(eps), current_cuda_stream());
    ctx->save_for_backward({sum, w});
    ctx->saved_data["eps"] = eps;
    return {sum, y};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto dres = grads[0].defined() ? grads[0].contiguous() : at::Tensor();
    if (!grads[1].defined()) return {dres, dres, at::Tensor(), at::Tensor()};
    auto [dx, dw] = norm_backward(grads[1].contiguous(), saved[0], saved[1], dres,
                                  ctx->saved_data["eps"].toDouble(), ctx->needs_input_grad(2));
    return {dx, dx, dw, at::Tensor()};
  }
};

/// x [rows, in] times w [out, in] transposed. The backward adds w's gradient into w's
/// accumulated gradient in the GEMM itself (no separate tensor and addition) where w has one.
struct linear_fn : public torch::autograd::Function<linear_fn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                            bool invariant) {
    ctx->save_for_backward({x, w});
    return invariant ? invariant_ops::mm(x, w) : at::mm(x, w.t());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &w = saved[1];
    const auto& dy = grads[0];
    at::Tensor dx, dw;
    if (ctx->needs_input_grad(0)) dx = at::mm(dy, w);
    if (ctx->needs_input_grad(1)) {
      auto g = w.grad();
      if (g.defined() && g.is_contiguous() && g.scalar_type() == dy.scalar_type() &&
          g.sizes() == w.sizes())
        at::addmm_out(g, g, dy.t(), x);
      else
        dw = at::mm(dy.t(), x);
    }
    return {dx, dw, at::Tensor()};
  }
};

struct rope_fn : public torch::autograd::Function<rope_fn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& cos,
                            const at::Tensor& sin) {
    auto xc = x.contiguous();
    auto c = cos.contiguous(), s = sin.contiguous();
    auto out = at::empty_like(xc);
    kernels::rope_cuda(xc.data_ptr(), c.data_ptr(), s.data_ptr(), out.data_ptr(), xc.size(0),
                       xc.size(1), xc.size(2), false, current_cuda_stream());
    ctx->save_for_backward({c, s});
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto g = grads[0].contiguous();
    auto dx = at::empty_like(g);
    kernels::rope_cuda(g.data_ptr(), saved[0].data_ptr(), saved[1].data_ptr(), dx.data_ptr(),
                       g.size(0), g.size(1), g.size(2), true, current_cuda_stream());
    return {dx, at::Tensor(), at::Tensor()};
  }
};

struct silu_mul_fn : public torch::autograd::Function<silu_mul_fn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& gate, const at::Tensor& up) {
    auto g = gate.contiguous(), u = up.contiguous();
    auto out = at::empty_like(g);
    kernels::silu_mul_forward_cuda(g.data_ptr(), u.data_ptr(), out.data_ptr(), g.numel(),
                                   current_cuda_stream());
    ctx->save_for_backward({g, u});
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &g = saved[0], &u = saved[1];
    auto d = grads[0].contiguous();
    auto dg = at::empty_like(g), du = at::empty_like(u);
    kernels::silu_mul_backward_cuda(d.data_ptr(), g.data_ptr(), u.data_ptr(), dg.data_ptr(),
                                    du.data_ptr(), g.numel(), current_cuda_stream());
    return {dg, du};
  }
};

/// The rows `ids` of the embedding table; the backward adds the rows' gradients into the table's
/// accumulated gradient in place where it has one (no [vocab, hidden] zeros and second addition).
struct embedding_fn : public torch::autograd::Function<embedding_fn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& table, const at::Tensor& ids) {
    ctx->save_for_backward({table, ids});
    return table.index_select(0, ids);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!ctx->needs_input_grad(0)) return {at::Tensor(), at::Tensor()};
    const auto saved = ctx->get_saved_variables();
    const auto &table = saved[0], &ids = saved[1];
    auto g = table.grad();
    if (g.defined() && g.is_contiguous() && g.scalar_type() == grads[0].scalar_type()) {
      g.index_add_(0, ids, grads[0]);
      return {at::Tensor(), at::Tensor()};
    }
    return {at::zeros_like(table).index_add_(0, ids, grads[0]), at::Tensor()};
  }
};

}  // namespace

bool available(const at::Device& device, at::ScalarType dtype) {
  return device.is_cuda() && dtype == at::kBFloat16 && kernels::train_kernels_available();
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
  return rms_norm_fn::apply(x, w, eps);
}

std::pair<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& h, const at::Tensor& delta,
                                               const at::Tensor& w, double eps) {
  auto out = add_rms_norm_fn::apply(h, delta, w, eps);
  return {out[0], out[1]};
}

at::Tensor linear(const at::Tensor& x, const at::Tensor& w, bool invariant) {
  return linear_fn::apply(x, w, invariant);
}

at::Tensor embedding(const at::Tensor& table, const at::Tensor& ids) {
  return embedding_fn::apply(table, ids);
}

at::Tensor qk_norm_rope(const at::Tensor& x, const at::Tensor& w, const at::Tensor& cos,
                        const at::Tensor& sin, double eps) {
  return qk_norm_rope_fn::apply(x, w, cos, sin, eps);
}

at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  return rope_fn::apply(x, cos, sin);
}

at::Tensor silu_mul(const at::Tensor& gate, const at::Tensor& up) {
  return silu_mul_fn::apply(gate, up);
}

}  // namespace milesrt::llm::train_ops
