#include "actors/trainer/trainer_core.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <stdexcept>

namespace milesrt::trainer {
using namespace milesrt::rl;  // losses, estimators, AdamW
namespace fs = std::filesystem;

namespace {

/// The packed scores of some sequences: per output token, in batch order.
struct packed_scores {
  at::Tensor logprobs, entropy;
};

/// Index sets of micro-batches: consecutive sequences up to `budget` tokens (prompt + output);
/// a longer sequence gets a micro-batch of its own.
std::vector<std::vector<size_t>> micro_batches(const std::vector<train_sequence>& batch, int64_t budget) {
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

}  // namespace

policy_trainer::policy_trainer(std::unique_ptr<llm::decoder> model, trainer_options options)
    : model_(std::move(model)), options_(std::move(options)) {
  auto& params = model_->mutable_params();
  params.enable_grad();
  const auto& buffer = params.buffer();
  // fp32 models train their own buffer; bf16 ones keep fp32 master weights beside it.
  master_ = buffer.scalar_type() == at::kFloat ? buffer.detach()
                                               : buffer.detach().to(at::kFloat).clone();
  adam_ = std::make_unique<adamw>(options_.optimizer, master_);
}

std::map<std::string, double> policy_trainer::train(const std::vector<train_sequence>& batch) {
  const auto t0 = std::chrono::steady_clock::now();
  const bool sft = options_.objective == "sft";
  const auto& cfg = model_->config();
  const at::Device device = model_->device();
  auto fopt = at::TensorOptions().dtype(at::kFloat);
  const int64_t S = static_cast<int64_t>(batch.size());
  if (S == 0) throw std::invalid_argument("trainer: an empty batch");
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].prompt.empty()) throw std::invalid_argument("trainer: sequence " + std::to_string(i) + " has no prompt token");
    if (!sft && batch[i].rollout_logprobs.size() != batch[i].output.size()) {
      throw std::invalid_argument("trainer: sequence " + std::to_string(i) + " has " +
                                  std::to_string(batch[i].rollout_logprobs.size()) +
                                  " rollout log-probs for " + std::to_string(batch[i].output.size()) +
                                  " output tokens");
    }
  }

  // The whole batch's token layout: seq_index, mask, and what the samples carry.
  std::vector<int64_t> seq_index, offsets{0};
  std::vector<float> rollout_lp, ref_lp, values;
  bool have_ref = true, have_values = true;
  for (int64_t i = 0; i < S; ++i) {
    const auto& s = batch[i];
    for (size_t t = 0; t < s.output.size(); ++t) seq_index.push_back(i);
    offsets.push_back(offsets.back() + static_cast<int64_t>(s.output.size()));
    rollout_lp.insert(rollout_lp.end(), s.rollout_logprobs.begin(), s.rollout_logprobs.end());
    if (s.ref_logprobs.size() != s.output.size()) have_ref = false;
    else ref_lp.insert(ref_lp.end(), s.ref_logprobs.begin(), s.ref_logprobs.end());
    if (s.values.size() != s.output.size()) have_values = false;
    else values.insert(values.end(), s.values.begin(), s.values.end());
  }
  const int64_t N = offsets.back();
  auto seq_t = at::tensor(seq_index, at::kLong);
  if (N == 0) seq_t = at::empty({0}, at::kLong);
  auto mask_t = at::ones({N}, fopt);
  auto rollout_t = sft ? at::Tensor() : (N ? at::tensor(rollout_lp, fopt) : at::empty({0}, fopt));
  auto ref_t = have_ref && N ? at::tensor(ref_lp, fopt) : at::Tensor();
  auto values_t = have_values && N ? at::tensor(values, fopt) : at::Tensor();
  const bool needs_ref = options_.loss.kl != kl_estimator::none || options_.loss.distill_coef != 0;
  if (!sft && needs_ref && !ref_t.defined() && N > 0) {
    throw std::invalid_argument("trainer: the KL / distillation terms need reference log-probs on every "
                                "sample (add a reference actor before the trainer)");
  }

  at::Tensor advantages, returns;
  std::map<std::string, double> m;
  if (!sft) {
    std::vector<float> rewards;
    std::vector<int64_t> groups;
    for (const auto& s : batch) {
      rewards.push_back(s.reward);
      groups.push_back(s.group);
    }
    auto rewards_t = at::tensor(rewards, fopt);
    at::Tensor token_rewards;
    if (options_.kl_in_reward && ref_t.defined()) {
      token_rewards = -options_.kl_reward_coef * kl_per_token(rollout_t, ref_t, options_.loss.kl);
    }
    if (options_.advantages.kind == estimator::gae && !values_t.defined() && N > 0) {
      throw std::invalid_argument("trainer: the gae estimator needs values on every sample (add a critic actor)");
    }
    auto adv = token_advantages(rewards_t, groups, seq_t, mask_t, token_rewards, values_t, options_.advantages);
    advantages = adv.advantages;
    returns = adv.returns;
    m["reward_mean"] = rewards_t.mean().item<double>();
    m["advantage_abs_mean"] = N ? advantages.abs().mean().item<double>() : 0.0;
  }

  auto micro = micro_batches(batch, options_.micro_batch_tokens);
  auto& params = model_->mutable_params();
  // Views made while gradients are on, whatever touched the parameters since the last step.
  params.rebuild_views();
  int64_t moe_layers = 0;
  for (int64_t l = 0; l < cfg.num_layers; ++l) moe_layers += cfg.is_moe_layer(l) ? 1 : 0;

  // Scores of the output tokens of the sequences in `idx` (one packed forward).
  // With `head` set (activation checkpointing), the forward also calls head(scores) for the
  // micro-batch's loss and runs its backward itself.
  using loss_head = std::function<at::Tensor(const llm::token_scores&)>;
  auto score = [&](const std::vector<size_t>& idx, const loss_head& head = nullptr) -> llm::token_scores {
    std::vector<llm::segment> segments;
    std::vector<int64_t> rows, targets;
    int64_t row = 0;
    bool replay = options_.routing_replay && moe_layers > 0;
    if (replay) {
      size_t with = 0;
      for (size_t i : idx) with += batch[i].experts.empty() ? 0 : 1;
      if (with != 0 && with != idx.size()) {
        throw std::invalid_argument("trainer: routing replay needs the rollout's experts on every sequence; " +
                                    std::to_string(idx.size() - with) + " of " + std::to_string(idx.size()) +
                                    " in a micro-batch have none");
      }
      replay = with == idx.size();
    }
    std::vector<std::vector<int64_t>> replay_rows(moe_layers);
    const int64_t k = cfg.num_experts_per_tok;
    for (size_t i : idx) {
      const auto& s = batch[i];
      std::vector<int64_t> full = s.prompt;
      full.insert(full.end(), s.output.begin(), s.output.end());
      const int64_t P = static_cast<int64_t>(s.prompt.size()), L = static_cast<int64_t>(full.size());
      for (int64_t t = 0; t < static_cast<int64_t>(s.output.size()); ++t) {
        rows.push_back(row + P - 1 + t);
        targets.push_back(s.output[t]);
      }
      if (replay) {
        if (static_cast<int64_t>(s.experts.size()) != (L - 1) * moe_layers * k) {
          throw std::invalid_argument("trainer: sequence " + std::to_string(i) + " carries " +
                                      std::to_string(s.experts.size()) + " routed experts, routing replay needs " +
                                      std::to_string((L - 1) * moe_layers * k));
        }
        for (int64_t l = 0; l < moe_layers; ++l) {
          for (int64_t t = 0; t < L; ++t) {
            for (int64_t j = 0; j < k; ++j) {
              // The last token's routing does not reach any scored token: any experts do.
              replay_rows[l].push_back(t < L - 1 ? s.experts[(t * moe_layers + l) * k + j] : j);
            }
          }
        }
      }
      segments.push_back({std::move(full), 0, nullptr});
      row += L;
    }
    std::vector<at::Tensor> replay_t;
    llm::forward_options fo;
    if (replay) {
      for (auto& r : replay_rows) replay_t.push_back(at::tensor(r, at::kLong).view({row, k}));
      fo.replay_experts = &replay_t;
    }
    auto from_hidden = [&](const at::Tensor& hidden) -> llm::token_scores {
      if (rows.empty()) {
        auto zero = hidden.sum().to(at::kFloat).mul(0).view({1}).narrow(0, 0, 0).to(at::kCPU);
        return {zero, zero};
      }
      auto picked = hidden.index_select(0, at::tensor(rows, at::kLong).to(device));
      auto sc = model_->score_rows(picked, at::tensor(targets, at::kLong), options_.temperature);
      return {sc.logprobs.to(at::kCPU), sc.entropy.to(at::kCPU)};
    };
    if (!head) return from_hidden(model_->forward(segments, fo).hidden);
    llm::token_scores kept;
    fo.checkpoint_head = [&](const at::Tensor& hidden) {
      kept = from_hidden(hidden);
      return head(kept);
    };
    model_->forward(segments, fo);
    return {kept.logprobs.detach(), kept.entropy.detach()};
  };

  auto slice = [&](const at::Tensor& t, const std::vector<size_t>& idx) -> at::Tensor {
    if (!t.defined()) return t;
    std::vector<at::Tensor> parts;
    for (size_t i : idx) parts.push_back(t.narrow(0, offsets[i], offsets[i + 1] - offsets[i]));
    return parts.empty() ? t.narrow(0, 0, 0) : at::cat(parts);
  };
  auto local_seq_index = [&](const std::vector<size_t>& idx) {
    std::vector<int64_t> s;
    for (size_t j = 0; j < idx.size(); ++j)
      for (int64_t t = offsets[idx[j]]; t < offsets[idx[j] + 1]; ++t) s.push_back(static_cast<int64_t>(j));
    return s.empty() ? at::empty({0}, at::kLong) : at::tensor(s, at::kLong);
  };

  // Old log-probs: the rollout's, this step's first forward (one update per step), or a no-grad
  // pass before the first update (several).
  at::Tensor old_all;
  const uint32_t updates = std::max<uint32_t>(1, options_.updates_per_step);
  if (!sft && options_.use_rollout_logprobs) old_all = rollout_t;
  if (!sft && !options_.use_rollout_logprobs && updates > 1) {
    at::NoGradGuard no_grad;
    std::vector<at::Tensor> parts;
    for (const auto& mb : micro) parts.push_back(score(mb).logprobs);
    old_all = at::cat(parts);
  }

  const double global_tokens = static_cast<double>(N), global_seqs = static_cast<double>(S);
  std::map<std::string, double> sums;
  double weight_sum = 0;
  uint64_t skipped = 0;
  double grad_norm = 0, lr = 0;
  std::vector<at::Tensor> first_logprobs;
  for (uint32_t u = 0; u < updates; ++u) {
    bool finite = true;
    for (const auto& mb : micro) {
      auto mask = slice(mask_t, mb);
      const double w = mask.numel();
      // The micro-batch's loss from its scores (metrics recorded); null when it is not finite.
      auto loss_of = [&](const llm::token_scores& sc) -> at::Tensor {
      at::Tensor loss;
      if (sft) {
        loss = sft_loss(sc.logprobs, mask, std::max(1.0, global_tokens));
        sums["sft_loss"] += loss.item<double>();
      } else {
        policy_batch pb;
        pb.logprobs = sc.logprobs;
        pb.old_logprobs = old_all.defined() ? slice(old_all, mb) : sc.logprobs.detach();
        pb.rollout_logprobs = slice(rollout_t, mb);
        pb.ref_logprobs = slice(ref_t, mb);
        pb.advantages = slice(advantages, mb);
        pb.entropy = sc.entropy;
        pb.mask = mask;
        pb.seq_index = local_seq_index(mb);
        pb.num_seqs = static_cast<int64_t>(mb.size());
        pb.global_tokens = std::max(1.0, global_tokens);
        pb.global_seqs = global_seqs;
        auto r = policy_loss(pb, options_.loss);
        loss = r.loss;
        for (const auto& [k, v] : r.metrics) sums[k] += v * w;
        weight_sum += w;
        sums["loss"] += loss.item<double>();
      }
      if (!std::isfinite(loss.item<double>())) {
        finite = false;
        return at::Tensor();
      }
      return loss;
      };
      if (options_.activation_checkpointing) {
        auto sc = score(mb, loss_of);  // the forward runs the backward too
        if (u == 0) first_logprobs.push_back(sc.logprobs);
      } else {
        auto sc = score(mb);
        if (u == 0) first_logprobs.push_back(sc.logprobs.detach());
        auto loss = loss_of(sc);
        if (loss.defined() && loss.requires_grad()) loss.backward();
      }
      if (!finite) break;
    }
    auto grad = params.buffer().grad();
    if (!grad.defined()) grad = at::zeros_like(params.buffer().detach());
    if (!finite) {
      skipped++;
      grad.zero_();
      continue;
    }
    auto g = grad.scalar_type() == at::kFloat ? grad : grad.to(at::kFloat);
    auto info = adam_->step(master_, g);
    grad.zero_();
    grad_norm = info.grad_norm;
    lr = info.lr;
    if (info.skipped) {
      skipped++;
      continue;
    }
    {
      at::NoGradGuard no_grad;
      if (params.buffer().scalar_type() != at::kFloat) params.buffer().detach().copy_(master_);
      if (!at::isfinite(params.buffer().detach()).all().item<bool>()) {
        throw std::runtime_error("trainer: the weights are no longer finite after optimizer step " +
                                 std::to_string(adam_->steps()) + "; nothing is published");
      }
    }
    params.rebuild_views();
  }

  if (!sft) {
    for (auto& [k, v] : sums) {
      if (k != "loss") m[k] = weight_sum > 0 ? v / weight_sum : 0.0;
    }
    m["loss"] = sums["loss"] / updates;
    if (N > 0) {
      auto current = at::cat(first_logprobs);
      auto diff = (current - rollout_t).abs();
      m["train_rollout_logprob_abs_diff"] = diff.mean().item<double>();
      m["train_rollout_logprob_abs_diff_max"] = diff.max().item<double>();
    }
  } else {
    m["sft_loss"] = sums["sft_loss"] / updates;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int64_t tokens = 0;
  for (const auto& s : batch) tokens += static_cast<int64_t>(s.prompt.size() + s.output.size());
  m["grad_norm"] = grad_norm;
  m["lr"] = lr;
  m["skipped_steps"] = static_cast<double>(skipped);
  m["train_tokens"] = static_cast<double>(tokens);
  m["train_tokens_per_s"] = secs > 0 ? tokens * updates / secs : 0.0;
  m["response_length_mean"] = static_cast<double>(N) / static_cast<double>(S);
  if (device.is_cuda()) {
    // MFU against the H100/H200 dense bf16 peak (989 TFLOP/s): 6*N*tokens + 6*L*d_attn*T^2 (causal).
    double n_params = static_cast<double>(params.buffer().numel());
    double attn = 0;
    for (const auto& s : batch) {
      const double T = static_cast<double>(s.prompt.size() + s.output.size());
      attn += 6.0 * cfg.num_layers * cfg.num_heads * cfg.head_dim * T * T / 2.0;
    }
    m["mfu"] = (6.0 * n_params * tokens + attn) * updates / secs / 989e12;
  }
  return m;
}

void policy_trainer::save(const fs::path& dir) const {
  fs::create_directories(dir);
  model_->save(dir / "model");
  auto bytes = adam_->save();
  std::ofstream out(dir / "optimizer.bin", std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + (dir / "optimizer.bin").string());
  if (model_->dtype() != at::kFloat) {
    auto cpu = master_.to(at::kCPU).contiguous();
    std::ofstream m(dir / "master.bin", std::ios::binary);
    m.write(static_cast<const char*>(cpu.data_ptr()), static_cast<std::streamsize>(cpu.nbytes()));
    if (!m) throw std::runtime_error("cannot write " + (dir / "master.bin").string());
  }
}

void policy_trainer::load(const fs::path& dir) {
  auto saved = llm::decoder::load(dir / "model", at::kFloat, at::Device(at::kCPU));
  const auto& names = model_->params().names();
  if (saved->params().names() != names || saved->params().shapes() != model_->params().shapes()) {
    throw std::runtime_error((dir / "model").string() + ": the saved model has other parameters than this one");
  }
  std::ifstream in(dir / "optimizer.bin", std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + (dir / "optimizer.bin").string());
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  adam_->load(bytes);
  at::NoGradGuard no_grad;
  auto& params = model_->mutable_params();
  // fp32 saves are exact; a bf16 model resumes its fp32 master weights from master.bin.
  if (model_->dtype() != at::kFloat) {
    std::ifstream m(dir / "master.bin", std::ios::binary);
    std::vector<char> raw((std::istreambuf_iterator<char>(m)), std::istreambuf_iterator<char>());
    if (static_cast<int64_t>(raw.size()) != master_.numel() * 4) {
      throw std::runtime_error((dir / "master.bin").string() + ": expected " +
                               std::to_string(master_.numel() * 4) + " bytes of fp32 master weights");
    }
    master_.copy_(at::from_blob(raw.data(), {master_.numel()}, at::kFloat).to(master_.device()));
  } else {
    master_.copy_(saved->params().buffer().to(master_.device()));
  }
  if (params.buffer().scalar_type() != at::kFloat) params.buffer().detach().copy_(master_);
  params.rebuild_views();
}

}  // namespace milesrt::trainer
