#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/sampling/philox.hpp"
#include "kernels/sampling/sampler.hpp"

namespace milesrt::kernels {
namespace {
float bf16_to_float(uint16_t b) {
  const uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
}  // namespace

void sample_rows_cpu(const sample_rows_args& a) {
  for (int64_t r = 0; r < a.rows; ++r) {
    const float t = a.temperature[r];
    auto z_at = [&](int64_t i) -> float {
      const float l = a.bf16 ? bf16_to_float(static_cast<const uint16_t*>(a.logits)[r * a.ld + i])
                             : static_cast<const float*>(a.logits)[r * a.ld + i];
      return l / t;
    };
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < a.vocab; ++i) m = std::max(m, z_at(i));
    double s = 0, zs = 0, best = -std::numeric_limits<double>::infinity();
    int64_t best_i = 0;
    for (int64_t i = 0; i < a.vocab; ++i) {
      const float z = z_at(i);
      const double e = std::exp(double(z) - double(m));
      s += e;
      zs += e * double(z);
      if (a.min_kept != nullptr && z < a.min_kept[r]) continue;
      const double v = double(z) - std::log(-std::log(philox_uniform(a.seed[r], a.position[r], i)));
      if (v > best) {
        best = v;
        best_i = i;
      }
    }
    const double lse = double(m) + std::log(s);
    a.token[r] = best_i;
    a.logprob[r] = float(double(z_at(best_i)) - lse);
    if (a.entropy != nullptr) a.entropy[r] = float(lse - zs / s);
  }
}

void score_rows_cpu(const score_rows_args& a) {
  for (int64_t r = 0; r < a.rows; ++r) {
    auto z_at = [&](int64_t i) -> float {
      const float l = a.bf16 ? bf16_to_float(static_cast<const uint16_t*>(a.logits)[r * a.ld + i])
                             : static_cast<const float*>(a.logits)[r * a.ld + i];
      return l / a.temperature;
    };
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < a.vocab; ++i) m = std::max(m, z_at(i));
    double s = 0, zs = 0;
    for (int64_t i = 0; i < a.vocab; ++i) {
      const double e = std::exp(double(z_at(i)) - double(m));
      s += e;
      zs += e * double(z_at(i));
    }
    const double lse = double(m) + std::log(s);
    const int64_t t = a.target[r];
    a.logprob[r] = t >= 0 && t < a.vocab ? float(double(z_at(t)) - lse)
                                         : std::numeric_limits<float>::quiet_NaN();
    a.entropy[r] = float(lse - zs / s);
    if (a.lse != nullptr) a.lse[r] = float(lse);
  }
}

}  // namespace milesrt::kernels
