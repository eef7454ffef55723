#include "actors/lib/serving/sampler.hpp"

#include <ATen/ATen.h>

#include <algorithm>

namespace milesrt::serving {

std::vector<device_sample_result> sampler::sample(const step_plan& plan,
                                                  const at::Tensor& hidden) const {
  return model_.device().is_cuda() ? sample_on_device(plan, hidden) : sample_on_host(plan, hidden);
}

std::vector<device_sample_result> sampler::sample_on_device(const step_plan& plan,
                                                            const at::Tensor& hidden) const {
  std::vector<device_sample_request> requests;
  bool entropy = false;
  int64_t at_row = 0;
  for (const auto& [seq, n] : plan) {
    if (samples(*seq, n)) {
      device_sample_request r;
      r.row = at_row + n - 1;
      r.temperature = seq->params.temperature;
      r.top_p = seq->params.top_p;
      r.top_k = seq->params.top_k;
      r.seed = sample_stream(seq->params.seed, seq->index);
      r.position = static_cast<int64_t>(seq->tokens.size());
      requests.push_back(r);
      entropy = entropy || seq->params.return_entropy;
    }
    at_row += n;
  }
  return serving::sample_on_device(model_, hidden, requests, entropy);
}

std::vector<device_sample_result> sampler::sample_on_host(const step_plan& plan,
                                                          const at::Tensor& hidden) const {
  std::vector<device_sample_result> drawn;
  int64_t at_row = 0;
  for (const auto& [seq, n] : plan) {
    if (samples(*seq, n)) {
      auto& s = *seq;
      auto last = hidden.narrow(0, at_row + n - 1, 1);
      device_sample_result d;
      d.token = draw(s, last, s.params.return_entropy ? &d.entropy : nullptr);
      auto lp = model_.score_rows(last, at::tensor({d.token}, at::kLong), s.params.temperature);
      d.logprob = lp.logprobs.item<float>();
      drawn.push_back(std::move(d));
    }
    at_row += n;
  }
  return drawn;
}

int64_t sampler::draw(sequence& s, const at::Tensor& row, float* entropy) const {
  auto logits = model_.logits_rows(row, s.params.temperature).squeeze(0).to(at::kCPU);
  auto probs = at::softmax(logits.to(at::kDouble), -1);
  if (entropy != nullptr) {
    *entropy = static_cast<float>(
        -(probs * at::log_softmax(logits.to(at::kDouble), -1)).sum().item<double>());
  }
  auto sorted = at::sort(probs, 0, /*descending=*/true);
  auto p = std::get<0>(sorted).contiguous();
  auto ids = std::get<1>(sorted).contiguous();
  const double* pp = p.data_ptr<double>();
  const int64_t* ip = ids.data_ptr<int64_t>();
  int64_t keep = p.numel();
  if (s.params.top_k > 0) keep = std::min(keep, s.params.top_k);
  if (s.params.top_p < 1.0) {
    double cum = 0;
    for (int64_t i = 0; i < keep; ++i) {
      cum += pp[i];
      if (cum >= s.params.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  double total = 0;
  for (int64_t i = 0; i < keep; ++i) total += pp[i];
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(s.rng) * total;
  double cum = 0;
  for (int64_t i = 0; i < keep; ++i) {
    cum += pp[i];
    if (u < cum) return ip[i];
  }
  return ip[keep - 1];
}

}  // namespace milesrt::serving
