#include "actors/trainer/scoring.hpp"

#include <ATen/ATen.h>

#include <stdexcept>
#include <string>

namespace milesrt::trainer {
namespace {

/// One segment per sequence (prompt + output), and per output token the packed row of the hidden
/// state that predicts it and the token itself.
struct packed_batch {
  std::vector<llm::segment> segments;
  std::vector<int64_t> rows, targets;
  int64_t total_rows = 0;
};

packed_batch pack(const std::vector<train_sequence>& batch, const std::vector<size_t>& idx) {
  packed_batch p;
  for (size_t i : idx) {
    const auto& s = batch[i];
    std::vector<int64_t> full = s.prompt;
    full.insert(full.end(), s.output.begin(), s.output.end());
    const int64_t P = static_cast<int64_t>(s.prompt.size()), L = static_cast<int64_t>(full.size());
    for (int64_t t = 0; t < static_cast<int64_t>(s.output.size()); ++t) {
      p.rows.push_back(p.total_rows + P - 1 + t);
      p.targets.push_back(s.output[t]);
    }
    p.segments.push_back({std::move(full), 0, nullptr});
    p.total_rows += L;
  }
  return p;
}

/// Whether the micro-batch replays the rollout's experts: all its sequences carry them (or none).
bool replays(const std::vector<train_sequence>& batch, const std::vector<size_t>& idx) {
  size_t with = 0;
  for (size_t i : idx) with += batch[i].experts.empty() ? 0 : 1;
  if (with != 0 && with != idx.size()) {
    throw std::invalid_argument(
        "trainer: routing replay needs the rollout's experts on every sequence; " +
        std::to_string(idx.size() - with) + " of " + std::to_string(idx.size()) +
        " in a micro-batch have none");
  }
  return with == idx.size();
}

/// Per MoE layer [total_rows, k]: the rollout's experts of every packed row.
std::vector<at::Tensor> replay_experts(const std::vector<train_sequence>& batch,
                                       const std::vector<size_t>& idx, int64_t moe_layers,
                                       int64_t k, int64_t total_rows) {
  std::vector<std::vector<int64_t>> rows(moe_layers);
  for (size_t i : idx) {
    const auto& s = batch[i];
    const int64_t L = static_cast<int64_t>(s.prompt.size() + s.output.size());
    if (static_cast<int64_t>(s.experts.size()) != (L - 1) * moe_layers * k) {
      throw std::invalid_argument("trainer: sequence " + std::to_string(i) + " carries " +
                                  std::to_string(s.experts.size()) +
                                  " routed experts, routing replay needs " +
                                  std::to_string((L - 1) * moe_layers * k));
    }
    for (int64_t l = 0; l < moe_layers; ++l) {
      for (int64_t t = 0; t < L; ++t) {
        for (int64_t j = 0; j < k; ++j) {
          // The last token's routing does not reach any scored token: any experts do.
          rows[l].push_back(t < L - 1 ? s.experts[(t * moe_layers + l) * k + j] : j);
        }
      }
    }
  }
  std::vector<at::Tensor> out;
  for (auto& r : rows) out.push_back(at::tensor(r, at::kLong).view({total_rows, k}));
  return out;
}

}  // namespace

llm::token_scores score_sequences(const llm::decoder& model,
                                  const std::vector<train_sequence>& batch,
                                  const std::vector<size_t>& idx, const trainer_options& o,
                                  const loss_head& head, adapter_pass adapters) {
  const auto& cfg = model.config();
  int64_t moe_layers = 0;
  for (int64_t l = 0; l < cfg.num_layers; ++l) moe_layers += cfg.is_moe_layer(l) ? 1 : 0;
  const bool replay = o.routing_replay && moe_layers > 0 && replays(batch, idx);
  const auto packed = pack(batch, idx);
  std::vector<at::Tensor> replay_t;
  llm::forward_options fo;
  fo.adapters_off = adapters.off;
  fo.lora_dropout = adapters.dropout;
  fo.lora_dropout_seed = adapters.dropout_seed;
  if (replay) {
    replay_t = replay_experts(batch, idx, moe_layers, cfg.num_experts_per_tok, packed.total_rows);
    fo.replay_experts = &replay_t;
  }
  auto from_hidden = [&](const at::Tensor& hidden) -> llm::token_scores {
    if (packed.rows.empty()) {
      auto zero = hidden.sum().to(at::kFloat).mul(0).view({1}).narrow(0, 0, 0).to(at::kCPU);
      return {zero, zero};
    }
    auto picked = hidden.index_select(0, at::tensor(packed.rows, at::kLong).to(model.device()));
    auto sc = model.score_rows(picked, at::tensor(packed.targets, at::kLong), o.temperature);
    return {sc.logprobs.to(at::kCPU), sc.entropy.to(at::kCPU)};
  };
  if (!head) return from_hidden(model.forward(packed.segments, fo).hidden);
  llm::token_scores kept;
  fo.checkpoint_layers = o.checkpoint_layers;
  fo.checkpoint_head = [&](const at::Tensor& hidden) {
    kept = from_hidden(hidden);
    return head(kept);
  };
  model.forward(packed.segments, fo);
  return {kept.logprobs.detach(), kept.entropy.detach()};
}

}  // namespace milesrt::trainer
