#include "actors/lib/llm/output_logprobs.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <stdexcept>
#include <string>

namespace milesrt::llm {

std::vector<std::vector<float>> output_logprobs(const decoder& model, double temperature,
                                                const sample_group& group) {
  // One packed pass over the samples that have output; score_sequences gives the log-probs of
  // tokens 1..L-1, of which the last O are the output's.
  std::vector<std::vector<float>> out(group.samples.size());
  std::vector<std::vector<int64_t>> seqs;
  std::vector<size_t> which;
  for (size_t i = 0; i < group.samples.size(); ++i) {
    const auto& s = group.samples[i];
    if (s.output.empty()) continue;
    if (s.prompt.empty())
      throw std::invalid_argument("sample " + std::to_string(i) + " has no prompt token");
    std::vector<int64_t> full = s.prompt;
    full.insert(full.end(), s.output.begin(), s.output.end());
    seqs.push_back(std::move(full));
    which.push_back(i);
  }
  if (seqs.empty()) return out;
  at::NoGradGuard no_grad;
  auto scores = model.score_sequences(seqs, temperature);
  for (size_t j = 0; j < which.size(); ++j) {
    const auto& s = group.samples[which[j]];
    auto lp = scores[j].logprobs.to(at::kCPU).to(at::kFloat).contiguous();
    const int64_t O = static_cast<int64_t>(s.output.size());
    const float* p = lp.data_ptr<float>() + (lp.numel() - O);
    out[which[j]].assign(p, p + O);
  }
  return out;
}

}  // namespace milesrt::llm
