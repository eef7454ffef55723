#include "actors/lib/llm/train_ops.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "actors/lib/llm/device.hpp"
#include "kernels/decoder/decoder_kernels.hpp"
#include "kernels/train/train_kernels.hpp"

namespace milesrt::llm::train_ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct rms_norm_fn : public torch::autograd::Function<rms_norm_fn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                            double eps) {
    auto xc = x.contiguous();
    auto y = at::empty_like(xc);
    const int64_t cols = xc.size(-1);
    kernels::add_rmsnorm_cuda(const_cast<void*>(xc.data_ptr()), nullptr, w.contiguous().data_ptr(),
                              y.data_ptr(), xc.numel() / cols, cols, static_cast<float>(eps),
                              current_cuda_stream());
    ctx->save_for_backward({xc, w});
    ctx->saved_data["eps"] = eps;
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &w = saved[1];
    const int64_t cols = x.size(-1), rows = x.numel() / cols;
    auto dy = grads[0].contiguous();
    auto dx = at::empty_like(x);
    auto dw = at::empty({cols}, x.options().dtype(at::kFloat));
    auto ws = at::empty({kernels::rmsnorm_backward_workspace(rows, cols) / 4 + 1},
                        x.options().dtype(at::kFloat));
    kernels::rmsnorm_backward_cuda(dy.data_ptr(), x.data_ptr(), w.contiguous().data_ptr(),
                                   dx.data_ptr(), dw.data_ptr<float>(), rows, cols,
                                   static_cast<float>(ctx->saved_data["eps"].toDouble()),
                                   ws.data_ptr<float>(), current_cuda_stream());
    return {dx, dw.to(w.scalar_type()), at::Tensor()};
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

}  // namespace

bool available(const at::Device& device, at::ScalarType dtype) {
  return device.is_cuda() && dtype == at::kBFloat16 && kernels::train_kernels_available();
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
  return rms_norm_fn::apply(x, w, eps);
}

at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  return rope_fn::apply(x, cos, sin);
}

at::Tensor silu_mul(const at::Tensor& gate, const at::Tensor& up) {
  return silu_mul_fn::apply(gate, up);
}

}  // namespace milesrt::llm::train_ops
