// The update phase of policy_trainer::train: each micro-batch's loss and backward, then AdamW.
#include "actors/trainer/update.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "actors/lib/dist/collectives.hpp"
#include "actors/lib/rl/master_weights.hpp"
#include "actors/trainer/batch_layout.hpp"
#include "actors/trainer/data_parallel.hpp"
#include "actors/trainer/scoring.hpp"
#include "actors/trainer/trainer_core.hpp"

namespace milesrt::trainer {

update_totals policy_trainer::update(const std::vector<train_sequence>& batch,
                                     const batch_layout& layout, const at::Tensor& advantages,
                                     const at::Tensor& old_logprobs) {
  update_totals totals;
  const uint32_t updates = std::max<uint32_t>(1, options_.updates_per_step);
  // With data parallelism this rank runs its share of the micro-batches (data_parallel.hpp).
  std::vector<size_t> mine;
  if (options_.group != nullptr) {
    mine = rank_micro_batches(layout, batch, options_.group->rank(), options_.group->world_size());
    for (size_t i : mine)
      for (size_t s : layout.micro_batches[i]) totals.own_sequences.push_back(s);
  } else {
    for (size_t i = 0; i < layout.micro_batches.size(); ++i) mine.push_back(i);
  }
  totals.own_micro_batches = mine.size();
  for (uint32_t u = 0; u < updates; ++u) {
    bool finite = true;
    for (size_t i : mine) {
      finite = backward_micro_batch(batch, layout, advantages, old_logprobs,
                                    layout.micro_batches[i], u == 0, totals);
      if (!finite) break;
    }
    if (options_.group != nullptr && sharded_)
      finite = scatter_gradients(*options_.group, model_->published().grad(), finite, shard_,
                                 grad_slice_);
    else if (options_.group != nullptr)
      finite = sum_gradients(*options_.group, model_->published().grad(), finite,
                             options_.grad_bucket_bytes);
    optimizer_step(finite, totals);
  }
  return totals;
}

bool policy_trainer::backward_micro_batch(const std::vector<train_sequence>& batch,
                                          const batch_layout& layout, const at::Tensor& advantages,
                                          const at::Tensor& old_logprobs,
                                          const std::vector<size_t>& mb, bool first,
                                          update_totals& totals) {
  bool finite = true;
  // The loss, or an undefined tensor when it is not finite.
  auto loss_of = [&](const llm::token_scores& sc) -> at::Tensor {
    auto loss = micro_batch_loss(layout, advantages, old_logprobs, mb, sc, totals);
    if (std::isfinite(loss.item<double>())) return loss;
    finite = false;
    return at::Tensor();
  };
  // LoRA dropout: masks from the optimizer step and the micro-batch (the same after a resume).
  adapter_pass ap;
  ap.dropout = model_->lora() != nullptr && model_->lora()->dropout > 0;
  ap.dropout_seed = (adam_->steps() + 1) * 0x100000001B3ull + mb.front();
  if (options_.activation_checkpointing) {
    auto sc = score_sequences(*model_, batch, mb, options_, loss_of,
                              ap);  // the forward runs the backward too
    if (first) totals.first_logprobs.push_back(sc.logprobs);
  } else {
    auto sc = score_sequences(*model_, batch, mb, options_, nullptr, ap);
    if (first) totals.first_logprobs.push_back(sc.logprobs.detach());
    auto loss = loss_of(sc);
    if (loss.defined() && loss.requires_grad()) loss.backward();
  }
  return finite;
}

at::Tensor policy_trainer::micro_batch_loss(
    const batch_layout& layout, const at::Tensor& advantages, const at::Tensor& old_logprobs,
    const std::vector<size_t>& mb, const llm::token_scores& sc, update_totals& totals) const {
  auto mask = layout.slice(layout.mask, mb);
  const double global_tokens = std::max(1.0, static_cast<double>(layout.trained_tokens));
  if (options_.objective == "sft") {
    auto loss = rl::sft_loss(sc.logprobs, mask, global_tokens);
    totals.sums["sft_loss"] += loss.item<double>();
    return loss;
  }
  rl::policy_batch pb;
  pb.logprobs = sc.logprobs;
  pb.old_logprobs = old_logprobs.defined() ? layout.slice(old_logprobs, mb) : sc.logprobs.detach();
  pb.rollout_logprobs = layout.slice(layout.rollout_logprobs, mb);
  pb.ref_logprobs = layout.slice(layout.ref_logprobs, mb);
  pb.teacher_logprobs = layout.slice(layout.teacher_logprobs, mb);
  pb.advantages = layout.slice(advantages, mb);
  pb.entropy = sc.entropy;
  pb.mask = mask;
  pb.seq_index = layout.local_seq_index(mb);
  pb.num_seqs = static_cast<int64_t>(mb.size());
  pb.global_tokens = global_tokens;
  pb.global_seqs = static_cast<double>(layout.num_seqs);
  auto r = loss_->compute(pb, options_.loss);
  const double w = static_cast<double>(mask.numel());
  for (const auto& [k, v] : r.metrics) totals.sums[k] += v * w;
  totals.weight_sum += w;
  totals.sums["loss"] += r.loss.item<double>();
  return r.loss;
}

void policy_trainer::optimizer_step(bool finite, update_totals& totals) {
  auto& params = model_->mutable_published();
  auto grad = params.grad();
  if (!finite) {
    totals.skipped++;
    grad.zero_();
    return;
  }
  if (sharded_) return sharded_step(totals);
  // The step zeroes the gradient and refreshes the bf16 weights from the master weights (one pass
  // on CUDA).
  const bool bf16 = params.buffer().scalar_type() != at::kFloat;
  auto info = adam_->step(master_, grad, bf16 ? params.buffer().detach() : at::Tensor(),
                          /*zero_grad=*/true);
  totals.grad_norm = info.grad_norm;
  totals.lr = info.lr;
  if (info.skipped) {
    totals.skipped++;
    return;
  }
  rl::check_finite_weights(params.buffer(), info.nonfinite, "trainer", adam_->steps(),
                           "; nothing is published");
  params.rebuild_views();
}

void policy_trainer::sharded_step(update_totals& totals) {
  auto& params = model_->mutable_published();
  auto& group = *options_.group;
  const auto norm = global_norm(group, grad_slice_, shard_, params.buffer().numel());
  auto info = adam_->step_with_norm(master_, grad_slice_, norm);
  params.grad().zero_();
  grad_slice_ = at::Tensor();
  totals.grad_norm = info.grad_norm;
  totals.lr = info.lr;
  if (info.skipped) {  // the norm is every rank's: they all skip
    totals.skipped++;
    return;
  }
  gather_weights(group, master_, shard_, params.buffer());
  rl::check_finite_weights(params.buffer(), "trainer", adam_->steps(), "; nothing is published");
  params.rebuild_views();
}

}  // namespace milesrt::trainer
