// CPU reference of the one-pass AdamW step (adamw.hpp).
#include <cmath>

#include "kernels/decoder/bf16.hpp"
#include "kernels/optim/adamw.hpp"

namespace milesrt::kernels {

void adamw_step_cpu(const adamw_args& a) {
  const float coef = a.grad_coef != nullptr ? *a.grad_coef : 1.f;
  for (int64_t i = 0; i < a.n; ++i) {
    float g = a.grad_bf16 ? bf16_bits_to_float(static_cast<uint16_t*>(a.grad)[i])
                          : static_cast<float*>(a.grad)[i];
    if (a.zero_grad) {
      if (a.grad_bf16)
        static_cast<uint16_t*>(a.grad)[i] = 0;
      else
        static_cast<float*>(a.grad)[i] = 0.f;
    }
    g *= coef;
    float p = a.master[i] * (1.f - a.lr * a.weight_decay);
    const float m = a.exp_avg[i] + (1.f - a.beta1) * (g - a.exp_avg[i]);
    const float v = a.beta2 * a.exp_avg_sq[i] + (1.f - a.beta2) * g * g;
    p -= a.step_size * (m / (std::sqrt(v) / a.bc2_sqrt + a.eps));
    a.master[i] = p;
    a.exp_avg[i] = m;
    a.exp_avg_sq[i] = v;
    const uint16_t w = float_to_bf16_bits(p);
    if (a.weights_bf16 != nullptr) a.weights_bf16[i] = w;
    if (a.nonfinite != nullptr &&
        (a.weights_bf16 != nullptr ? (w & 0x7f80u) == 0x7f80u : !std::isfinite(p)))
      *a.nonfinite = 1;
  }
}

}  // namespace milesrt::kernels
