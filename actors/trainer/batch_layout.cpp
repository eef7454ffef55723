#include "actors/trainer/batch_layout.hpp"

#include <ATen/ATen.h>

#include <stdexcept>
#include <string>

namespace milesrt::trainer {
namespace {

void check_batch(const std::vector<train_sequence>& batch, bool sft) {
  if (batch.empty()) throw std::invalid_argument("trainer: an empty batch");
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].prompt.empty())
      throw std::invalid_argument("trainer: sequence " + std::to_string(i) +
                                  " has no prompt token");
    if (!sft && batch[i].rollout_logprobs.size() != batch[i].output.size()) {
      throw std::invalid_argument("trainer: sequence " + std::to_string(i) + " has " +
                                  std::to_string(batch[i].rollout_logprobs.size()) +
                                  " rollout log-probs for " +
                                  std::to_string(batch[i].output.size()) + " output tokens");
    }
    if (!batch[i].mask.empty() && batch[i].mask.size() != batch[i].output.size()) {
      throw std::invalid_argument("trainer: sequence " + std::to_string(i) + " has a mask of " +
                                  std::to_string(batch[i].mask.size()) + " for " +
                                  std::to_string(batch[i].output.size()) + " output tokens");
    }
  }
}

}  // namespace

std::vector<std::vector<size_t>> micro_batches(const std::vector<train_sequence>& batch,
                                               int64_t budget) {
  std::vector<std::vector<size_t>> out;
  int64_t used = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const int64_t n = static_cast<int64_t>(batch[i].prompt.size() + batch[i].output.size());
    if (out.empty() || used + n > budget) {
      out.emplace_back();
      used = 0;
    }
    out.back().push_back(i);
    used += n;
  }
  return out;
}

batch_layout lay_out(const std::vector<train_sequence>& batch, bool sft,
                     int64_t micro_batch_tokens) {
  check_batch(batch, sft);
  auto fopt = at::TensorOptions().dtype(at::kFloat);
  batch_layout l;
  l.num_seqs = static_cast<int64_t>(batch.size());
  l.offsets = {0};
  std::vector<int64_t> seq_index;
  std::vector<float> rollout_lp, ref_lp, teacher_lp, values, mask;
  bool have_ref = true, have_teacher = true, have_values = true;
  for (int64_t i = 0; i < l.num_seqs; ++i) {
    const auto& s = batch[i];
    for (size_t t = 0; t < s.output.size(); ++t) {
      seq_index.push_back(i);
      mask.push_back(s.mask.empty() || s.mask[t] ? 1.0f : 0.0f);
      l.trained_tokens += mask.back() > 0 ? 1 : 0;
    }
    l.offsets.push_back(l.offsets.back() + static_cast<int64_t>(s.output.size()));
    rollout_lp.insert(rollout_lp.end(), s.rollout_logprobs.begin(), s.rollout_logprobs.end());
    if (s.ref_logprobs.size() != s.output.size())
      have_ref = false;
    else
      ref_lp.insert(ref_lp.end(), s.ref_logprobs.begin(), s.ref_logprobs.end());
    if (s.teacher_logprobs.size() != s.output.size())
      have_teacher = false;
    else
      teacher_lp.insert(teacher_lp.end(), s.teacher_logprobs.begin(), s.teacher_logprobs.end());
    if (s.values.size() != s.output.size())
      have_values = false;
    else
      values.insert(values.end(), s.values.begin(), s.values.end());
  }
  const int64_t N = l.num_tokens = l.offsets.back();
  l.seq_index = N ? at::tensor(seq_index, at::kLong) : at::empty({0}, at::kLong);
  l.mask = N ? at::tensor(mask, fopt) : at::empty({0}, fopt);
  if (!sft) l.rollout_logprobs = N ? at::tensor(rollout_lp, fopt) : at::empty({0}, fopt);
  if (have_ref && N) l.ref_logprobs = at::tensor(ref_lp, fopt);
  if (have_teacher && N) l.teacher_logprobs = at::tensor(teacher_lp, fopt);
  if (have_values && N) l.values = at::tensor(values, fopt);
  l.micro_batches = micro_batches(batch, micro_batch_tokens);
  return l;
}

at::Tensor batch_layout::slice(const at::Tensor& t, const std::vector<size_t>& idx) const {
  if (!t.defined()) return t;
  std::vector<at::Tensor> parts;
  for (size_t i : idx) parts.push_back(t.narrow(0, offsets[i], offsets[i + 1] - offsets[i]));
  return parts.empty() ? t.narrow(0, 0, 0) : at::cat(parts);
}

at::Tensor batch_layout::local_seq_index(const std::vector<size_t>& idx) const {
  std::vector<int64_t> s;
  for (size_t j = 0; j < idx.size(); ++j)
    for (int64_t t = offsets[idx[j]]; t < offsets[idx[j] + 1]; ++t)
      s.push_back(static_cast<int64_t>(j));
  return s.empty() ? at::empty({0}, at::kLong) : at::tensor(s, at::kLong);
}

}  // namespace milesrt::trainer
