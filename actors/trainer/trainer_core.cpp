#include "actors/trainer/trainer_core.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include "actors/lib/dist/collectives.hpp"
#include "actors/lib/llm/device.hpp"
#include "actors/lib/rl/master_weights.hpp"
#include "actors/trainer/batch_layout.hpp"
#include "actors/trainer/scoring.hpp"
#include "actors/trainer/update.hpp"
#include "runtime/core/timer.hpp"

namespace milesrt::trainer {
using namespace milesrt::rl;  // losses, estimators, AdamW
namespace fs = std::filesystem;

namespace {

/// With samples of several weight versions (async schedules): the largest train/rollout log-prob
/// difference over the sequences sampled entirely under the batch's newest version (the weights
/// the trainer holds, when it is theirs) and over the others, older or mixed.
void add_version_split(std::map<std::string, double>& m, const at::Tensor& diff,
                       const batch_layout& layout, const std::vector<train_sequence>& batch,
                       std::optional<uint64_t> held) {
  // Each sequence's largest difference, from one copy of the per-token differences to the host
  // (-1: a sequence without versions or sampled tokens).
  const auto host = diff.detach().to(at::kCPU, at::kDouble).contiguous();
  const double* d = host.data_ptr<double>();
  std::vector<double> seq_max(batch.size(), -1);
  uint64_t newest = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    for (auto v : batch[i].versions) newest = std::max(newest, v);
    const int64_t from = layout.offsets[i], to = layout.offsets[i + 1];
    if (batch[i].versions.empty() || to == from) continue;
    seq_max[i] = *std::max_element(d + from, d + to);
  }
  auto all_at = [&](size_t i, uint64_t version) {
    const auto& v = batch[i].versions;
    return std::all_of(v.begin(), v.end(), [&](uint64_t x) { return x == version; });
  };
  double worst = -1, fresh = -1, older = -1;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (seq_max[i] < 0) continue;
    // The sequences sampled entirely under the weights the trainer holds.
    if (held && all_at(i, *held)) worst = std::max(worst, seq_max[i]);
    double& slot = all_at(i, newest) ? fresh : older;
    slot = std::max(slot, seq_max[i]);
  }
  if (worst >= 0) m["train_rollout_logprob_abs_diff_max_held"] = worst;
  if (fresh >= 0 && older >= 0) {
    m["train_rollout_logprob_abs_diff_max_newest"] = fresh;
    m["train_rollout_logprob_abs_diff_max_older"] = older;
  }
}

/// The loss metrics of the step: RL terms as token-weighted means over micro-batches, losses
/// averaged over the updates, and how far the first forward's log-probs are from the rollout's.
void add_loss_metrics(std::map<std::string, double>& m, update_totals& t,
                      const batch_layout& layout, const std::vector<train_sequence>& batch,
                      bool sft, uint32_t updates, std::optional<uint64_t> held) {
  if (sft) {
    m["sft_loss"] = t.sums["sft_loss"] / updates;
    return;
  }
  for (auto& [k, v] : t.sums) {
    if (k != "loss") m[k] = t.weight_sum > 0 ? v / t.weight_sum : 0.0;
  }
  m["loss"] = t.sums["loss"] / updates;
  if (layout.num_tokens > 0 && !t.first_logprobs.empty()) {
    auto current = at::cat(t.first_logprobs);
    // A data-parallel rank compares its own sequences' tokens; over the sampled tokens only:
    // context tokens have no rollout log-prob.
    const bool own = !t.own_sequences.empty();
    auto rollout =
        own ? layout.slice(layout.rollout_logprobs, t.own_sequences) : layout.rollout_logprobs;
    auto mask = own ? layout.slice(layout.mask, t.own_sequences) : layout.mask;
    auto per_token = (current - rollout).abs().masked_fill(mask <= 0, 0.0);
    auto diff = per_token.masked_select(mask > 0);
    if (diff.numel() == 0) diff = at::zeros({1}, diff.options());
    m["train_rollout_logprob_abs_diff"] = diff.mean().item<double>();
    m["train_rollout_logprob_abs_diff_max"] = diff.max().item<double>();
    // By version: per token in the layout's order (a rank's own share has another order).
    if (!own) add_version_split(m, per_token, layout, batch, held);
  }
}

/// Optimizer, size and speed metrics of the step (MFU on CUDA).
void add_step_metrics(std::map<std::string, double>& m, const update_totals& t,
                      const std::vector<train_sequence>& batch, const batch_layout& layout,
                      const llm::decoder& model, uint32_t updates, double secs) {
  int64_t tokens = 0;
  for (const auto& s : batch) tokens += static_cast<int64_t>(s.prompt.size() + s.output.size());
  m["grad_norm"] = t.grad_norm;
  m["lr"] = t.lr;
  m["skipped_steps"] = static_cast<double>(t.skipped);
  m["train_tokens"] = static_cast<double>(tokens);
  // Data parallelism: how the step's micro-batches were shared (this rank's, of all).
  m["train_micro_batches"] = static_cast<double>(layout.micro_batches.size());
  m["rank_micro_batches"] = static_cast<double>(t.own_micro_batches);
  m["train_tokens_per_s"] = secs > 0 ? tokens * updates / secs : 0.0;
  m["response_length_mean"] =
      static_cast<double>(layout.num_tokens) / static_cast<double>(layout.num_seqs);
  if (!batch.empty()) {
    double lo = 1e300, hi = 0, sum = 0, squares = 0;
    for (const auto& s : batch) {
      const double n = static_cast<double>(s.output.size());
      lo = std::min(lo, n);
      hi = std::max(hi, n);
      sum += n;
      squares += n * n;
    }
    const double mean = sum / static_cast<double>(batch.size());
    m["response_length_min"] = lo;
    m["response_length_max"] = hi;
    m["response_length_std"] =
        std::sqrt(std::max(0.0, squares / static_cast<double>(batch.size()) - mean * mean));
  }
  if (model.device().is_cuda()) m["mfu"] = train_step_flops(batch, model) * updates / secs / 989e12;
}

/// Expert-load balance of an MoE batch, from the experts the rollout routed each token to
/// (sample.experts: per token, per MoE layer, top-k). Per layer, an expert's load is its share of
/// the layer's assignments over the even share 1/E (1 = balanced). Metrics: moe_load_max (the
/// most loaded expert's load, averaged over layers), moe_load_cv (the loads' coefficient of
/// variation, averaged over layers), moe_unused_experts_frac; list `expert_load`: every layer's
/// every expert's load.
void add_expert_load_metrics(std::map<std::string, double>& m,
                             std::map<std::string, std::vector<double>>* lists,
                             const std::vector<train_sequence>& batch,
                             const llm::model_config& cfg) {
  const int64_t E = cfg.num_experts, k = cfg.num_experts_per_tok, L = cfg.num_moe_layers();
  if (E <= 0 || k <= 0 || L <= 0) return;
  std::vector<double> counts(static_cast<size_t>(L * E), 0.0);
  double total = 0;
  for (const auto& s : batch) {
    for (size_t i = 0; i < s.experts.size(); ++i) {
      const int64_t layer = static_cast<int64_t>(i / static_cast<size_t>(k)) % L, e = s.experts[i];
      if (e < 0 || e >= E) continue;
      counts[static_cast<size_t>(layer * E + e)] += 1;
      total += 1;
    }
  }
  if (total == 0) return;
  double max_sum = 0, cv_sum = 0, unused = 0;
  std::vector<double> loads;
  for (int64_t l = 0; l < L; ++l) {
    double n = 0;
    for (int64_t e = 0; e < E; ++e) n += counts[static_cast<size_t>(l * E + e)];
    if (n == 0) continue;
    double mx = 0, squares = 0;
    for (int64_t e = 0; e < E; ++e) {
      const double load = counts[static_cast<size_t>(l * E + e)] * static_cast<double>(E) / n;
      loads.push_back(load);
      mx = std::max(mx, load);
      squares += (load - 1.0) * (load - 1.0);
      unused += load == 0 ? 1 : 0;
    }
    max_sum += mx;
    cv_sum += std::sqrt(squares / static_cast<double>(E));
  }
  const double layers = static_cast<double>(loads.size()) / static_cast<double>(E);
  m["moe_load_max"] = max_sum / layers;
  m["moe_load_cv"] = cv_sum / layers;
  m["moe_unused_experts_frac"] = unused / static_cast<double>(loads.size());
  if (lists != nullptr) (*lists)["expert_load"] = std::move(loads);
}

}  // namespace

double train_step_flops(const std::vector<train_sequence>& batch, const llm::decoder& model) {
  // 6*N*tokens + 6*L*d_attn*sum(T_i^2): the second term is causal attention forward + backward.
  const auto& cfg = model.config();
  const double n_params = static_cast<double>(model.params().buffer().numel());
  double flops = 0;
  for (const auto& s : batch) {
    const double T = static_cast<double>(s.prompt.size() + s.output.size());
    flops += 6.0 * n_params * T + 6.0 * cfg.num_layers * cfg.num_heads * cfg.head_dim * T * T;
  }
  return flops;
}

policy_trainer::policy_trainer(std::unique_ptr<llm::decoder> model, trainer_options options,
                               const rl::registries& losses)
    : model_(std::move(model)),
      options_(std::move(options)),
      estimator_(losses.estimators.make(options_.estimator)),
      loss_(losses.policy_losses.make(options_.policy_loss)) {
  // With LoRA the adapters train and the base stays frozen (no gradient buffer for it).
  auto& params = model_->mutable_published();
  params.enable_grad();
  if (model_->lora() != nullptr) base_hash_ = lora_base_hash(model_->params());
  // fp32 models train their own buffer; bf16 ones keep fp32 master weights beside it. ZeRO-1: a
  // rank keeps an fp32 copy of its slice alone.
  const auto* g = options_.group;
  sharded_ = options_.shard_optimizer && g != nullptr && g->world_size() > 1;
  if (sharded_ && model_->lora() != nullptr)
    throw std::invalid_argument(
        "trainer: a sharded optimizer (shardOptimizer) with LoRA is not "
        "built (the adapters' optimizer state is small: leave it off)");
  if (sharded_) {
    auto flat = params.buffer().detach().view(-1);
    shard_ = rl::shard_of(flat.numel(), g->rank(), g->world_size());
    master_ = flat.narrow(0, shard_.begin, shard_.length()).to(at::kFloat).clone();
  } else {
    master_ = fp32_master(params.buffer());
  }
  adam_ = std::make_unique<adamw>(options_.optimizer, master_);
}

policy_trainer::policy_trainer(std::unique_ptr<llm::decoder> model, trainer_options options)
    : policy_trainer(std::move(model), std::move(options), builtin_registries()) {}

std::map<std::string, double> policy_trainer::train(
    const std::vector<train_sequence>& batch, std::map<std::string, std::vector<double>>* lists) {
  const timer t0;
  llm::reset_peak_memory(model_->device());  // the training phase starts
  const bool sft = options_.objective == "sft";
  auto layout = lay_out(batch, sft, options_.micro_batch_tokens);
  std::map<std::string, double> m;
  if (!sft) layout.ref_logprobs = base_logprobs(batch, layout);
  const auto adv = sft ? at::Tensor() : advantages(batch, layout, m);
  if (lists != nullptr) {
    auto& lengths = (*lists)["response_length"];
    for (const auto& s : batch) lengths.push_back(static_cast<double>(s.output.size()));
    if (adv.defined() && adv.numel() > 0) {
      auto a = adv.detach().to(at::kDouble).contiguous().view(-1);
      (*lists)["advantage"].assign(a.data_ptr<double>(), a.data_ptr<double>() + a.numel());
    }
  }
  // Views made while gradients are on, whatever touched the parameters since the last step.
  model_->mutable_published().rebuild_views();
  const auto old = old_logprobs(batch, layout);
  auto totals = update(batch, layout, adv, old);
  const uint32_t updates = std::max<uint32_t>(1, options_.updates_per_step);
  add_loss_metrics(m, totals, layout, batch, sft, updates, held_version_);
  const double secs = t0.seconds();
  add_step_metrics(m, totals, batch, layout, *model_, updates, secs);
  if (model_->device().is_cuda())
    m["train_gpu_memory_peak_gib"] = llm::peak_memory_gib(model_->device());
  // What training holds besides the model (LoRA: of the adapters alone): the trained parameters,
  // and AdamW's two moments plus the fp32 master weights, 12 bytes a parameter.
  // ZeRO-1: this rank's slice of them (about 1/N).
  m["trainer_trained_params"] = static_cast<double>(model_->published().buffer().numel());
  m["trainer_optimizer_master_bytes"] =
      static_cast<double>(adam_->exp_avg().nbytes() + adam_->exp_avg_sq().nbytes()) +
      static_cast<double>(master_.numel()) * 4;
  if (sharded_) m["trainer_optimizer_shards"] = options_.group->world_size();
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) == 0)  // the process's peak resident memory (Linux: KiB)
    m["process_peak_rss_mib"] = static_cast<double>(usage.ru_maxrss) / 1024.0;
  add_expert_load_metrics(m, lists, batch, model_->config());
  return m;
}

at::Tensor policy_trainer::advantages(const std::vector<train_sequence>& batch,
                                      const batch_layout& layout,
                                      std::map<std::string, double>& m) const {
  const int64_t N = layout.num_tokens;
  const bool needs_ref = options_.loss.kl != kl_estimator::none;
  if (needs_ref && !layout.ref_logprobs.defined() && N > 0) {
    throw std::invalid_argument(
        "trainer: the KL terms need reference log-probs on every sample (add a reference actor "
        "before the trainer" +
        std::string(model_->lora() != nullptr ? ", or set loraBaseReference)" : ")"));
  }
  if (options_.loss.distill_coef != 0 && !layout.teacher_logprobs.defined() && N > 0) {
    throw std::invalid_argument(
        "trainer: distillation (distillCoef) needs teacher log-probs on every sample (add a "
        "teacher actor before the trainer)");
  }
  if (estimator_->needs_values() && !layout.values.defined() && N > 0) {
    throw std::invalid_argument("trainer: the " + options_.estimator +
                                " estimator needs values on every sample (add a critic actor)");
  }
  std::vector<float> rewards;
  std::vector<int64_t> groups;
  for (const auto& s : batch) {
    rewards.push_back(s.reward);
    groups.push_back(s.group);
  }
  auto rewards_t = at::tensor(rewards, at::TensorOptions().dtype(at::kFloat));
  at::Tensor token_rewards;
  if (options_.kl_in_reward && layout.ref_logprobs.defined()) {
    token_rewards = -options_.kl_reward_coef *
                    kl_per_token(layout.rollout_logprobs, layout.ref_logprobs, options_.loss.kl);
  }
  auto adv = token_advantages(*estimator_, rewards_t, groups, layout.seq_index, layout.mask,
                              token_rewards, layout.values, options_.advantages)
                 .advantages;
  m["reward_mean"] = rewards_t.mean().item<double>();
  m["advantage_abs_mean"] = N ? adv.abs().mean().item<double>() : 0.0;
  return adv;
}

at::Tensor policy_trainer::old_logprobs(const std::vector<train_sequence>& batch,
                                        const batch_layout& layout) const {
  if (options_.objective == "sft") return at::Tensor();
  if (options_.use_rollout_logprobs) return layout.rollout_logprobs;
  if (options_.updates_per_step <= 1) return at::Tensor();  // this step's own first forward
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> parts;
  for (const auto& mb : layout.micro_batches)
    parts.push_back(score_sequences(*model_, batch, mb, options_).logprobs);
  return at::cat(parts);
}

void policy_trainer::save(const fs::path& dir) const {
  fs::create_directories(dir);
  if (model_->lora() != nullptr) return save_lora(dir);
  // Data-parallel ranks hold the same weights: rank 0 writes them; with ZeRO-1 every rank writes
  // its slice of the optimizer.
  const auto* g = options_.group;
  const bool rank0 = g == nullptr || g->rank() == 0;
  if (rank0) model_->save(dir / "model");
  if (sharded_)
    save_optimizer_shard(dir, *adam_, master_, g->rank(), g->world_size());
  else if (rank0)
    save_optimizer_state(dir, *adam_, master_, model_->dtype() != at::kFloat);
}

void policy_trainer::load(const fs::path& dir) {
  if (model_->lora() != nullptr) return load_lora(dir);
  if (fs::exists(dir / "lora.json")) {
    throw std::runtime_error((dir / "lora.json").string() +
                             ": a LoRA checkpoint (adapters only) cannot resume a trainer without "
                             "lora settings");
  }
  auto saved = llm::decoder::load(dir / "model", at::kFloat, at::Device(at::kCPU));
  const auto& names = model_->params().names();
  if (saved->params().names() != names || saved->params().shapes() != model_->params().shapes()) {
    throw std::runtime_error((dir / "model").string() +
                             ": the saved model has other parameters than this one");
  }
  at::NoGradGuard no_grad;
  auto& params = model_->mutable_params();
  if (sharded_) {
    load_optimizer_shard(dir, *adam_, master_, options_.group->rank(),
                         options_.group->world_size());
    params.buffer().detach().copy_(saved->params().buffer().to(params.buffer().device()));
    params.rebuild_views();
    return;
  }
  load_optimizer_state(dir, *adam_);
  // fp32 saves are exact; a bf16 model resumes its fp32 master weights from master.bin.
  if (model_->dtype() != at::kFloat) {
    master_.copy_(read_master(dir, master_.numel()).to(master_.device()));
  } else {
    master_.copy_(saved->params().buffer().to(master_.device()));
  }
  if (params.buffer().scalar_type() != at::kFloat) params.buffer().detach().copy_(master_);
  params.rebuild_views();
}

}  // namespace milesrt::trainer
