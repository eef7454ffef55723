// The decoder's mixture-of-experts layers: the router (or a replayed routing), the experts as
// grouped GEMMs on the GPU or one expert at a time with their LoRA terms, and the load-balance
// loss of a forward.
#include <ATen/ATen.h>

#include <map>

#include "actors/lib/llm/forward_pass.hpp"
#include "actors/lib/llm/paged_forward.hpp"

namespace milesrt::llm {

at::Tensor forward_pass::moe_ffn(int64_t layer, const std::string& p, const at::Tensor& x,
                                 bool record) {
  const routing r = route(layer, p, x);
  // On the GPU without autograd: no host synchronisation. The grouped GEMMs know no adapters.
  const bool expert_adapters = lora && !lora.config->target_parameters.empty();
  auto out = !expert_adapters && !invariant && paged::grouped_experts(x, P, p, c)
                 ? paged::moe_grouped(x, r.weights, r.chosen, P, p, c)
                 : moe_by_expert(layer, p, x, r);
  if (record) {
    result.experts.push_back(r.chosen.narrow(0, 0, T));
    result.router_probs.push_back(r.probs.narrow(0, 0, T));
  }
  return out;
}

forward_pass::routing forward_pass::route(int64_t layer, const std::string& p,
                                          const at::Tensor& x) const {
  int64_t moe_index = 0;
  for (int64_t l = 0; l < layer; ++l) moe_index += c.is_moe_layer(l) ? 1 : 0;
  routing r;
  const auto& gate = P.get(p + "mlp.gate.weight");
  auto router_logits = invariant ? train_ops::linear(x, gate, true) : row_ops::linear_rows(x, gate);
  r.probs = at::softmax(router_logits.to(at::kFloat), -1);
  if (opt.replay_experts != nullptr) {
    TORCH_CHECK(moe_index < static_cast<int64_t>(opt.replay_experts->size()),
                "routing replay has experts for ", opt.replay_experts->size(), " MoE layers");
    r.chosen = (*opt.replay_experts)[moe_index].to(device).to(at::kLong);
    TORCH_CHECK(r.chosen.size(0) == T && r.chosen.size(1) == c.num_experts_per_tok,
                "routing replay for MoE layer ", moe_index, " must be [", T, ", ",
                c.num_experts_per_tok, "]");
    if (Tp > T)
      r.chosen = at::cat({r.chosen, r.chosen.narrow(0, 0, 1).expand({Tp - T, r.chosen.size(1)})});
    r.weights = r.probs.gather(1, r.chosen);
  } else {
    auto top = at::topk(r.probs, c.num_experts_per_tok, -1);
    r.weights = std::get<0>(top);
    r.chosen = std::get<1>(top);
  }
  if (c.norm_topk_prob) {
    at::Tensor sum = r.weights.select(1, 0).unsqueeze(1);  // in slot order, row by row
    for (int64_t s = 1; s < r.weights.size(1); ++s) sum = sum + r.weights.select(1, s).unsqueeze(1);
    r.weights = r.weights / (invariant ? sum : r.weights.sum(-1, true));
  }
  r.weights = r.weights.to(x.scalar_type());
  return r;
}

// Each expert runs once on its rows; the weighted outputs are then added slot by slot, so each
// token's sum has the same order whatever else is in the batch.
at::Tensor forward_pass::moe_by_expert(int64_t layer, const std::string& p, const at::Tensor& x,
                                       const routing& r) const {
  auto linear_rows = [this](const at::Tensor& a, const at::Tensor& w) {
    return invariant ? linear(a, w) : row_ops::linear_rows(a, w);
  };
  auto moe_out = at::zeros_like(x);
  auto chosen_cpu = r.chosen.to(at::kCPU);
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> by_expert;  // expert -> (row, slot)
  auto acc = chosen_cpu.accessor<int64_t, 2>();
  for (int64_t t = 0; t < T; ++t)  // padding rows are routed nowhere
    for (int64_t s = 0; s < c.num_experts_per_tok; ++s) by_expert[acc[t][s]].push_back({t, s});
  std::vector<at::Tensor> contrib;  // per slot: [T, hidden]
  for (int64_t s = 0; s < c.num_experts_per_tok; ++s) contrib.push_back(at::zeros_like(x));
  for (auto& [e, rows] : by_expert) {
    std::vector<int64_t> rs;
    for (auto& row_slot : rows) rs.push_back(row_slot.first);
    auto idx = at::tensor(rs, at::kLong).to(device);
    auto xe = row_ops::pad_rows(x.index_select(0, idx));
    const std::string ep = p + "mlp.experts." + std::to_string(e) + ".";
    auto gate = linear_rows(xe, P.get(ep + "gate_proj.weight"));
    auto up = linear_rows(xe, P.get(ep + "up_proj.weight"));
    // peft's gate_up_proj adapter: one delta [rows, 2I], gate's half then up's.
    if (auto d = lora_expert_delta(lora, layer, "mlp.experts.gate_up_proj", e, xe); d.defined()) {
      const int64_t I = c.moe_intermediate_size;
      gate = gate + d.narrow(1, 0, I);
      up = up + d.narrow(1, I, I);
    }
    auto act = at::silu(gate) * up;
    auto ye = linear_rows(act, P.get(ep + "down_proj.weight"));
    if (auto d = lora_expert_delta(lora, layer, "mlp.experts.down_proj", e, act); d.defined())
      ye = ye + d;
    for (int64_t s = 0; s < c.num_experts_per_tok; ++s) {
      std::vector<int64_t> sel_rows, sel_idx;
      for (size_t j = 0; j < rows.size(); ++j) {
        if (rows[j].second == s) {
          sel_rows.push_back(rows[j].first);
          sel_idx.push_back(static_cast<int64_t>(j));
        }
      }
      if (sel_rows.empty()) continue;
      auto tr = at::tensor(sel_rows, at::kLong).to(device);
      auto ti = at::tensor(sel_idx, at::kLong).to(device);
      auto w = r.weights.index_select(0, tr).select(1, s).unsqueeze(1);
      contrib[s] = contrib[s].index_add(0, tr, ye.index_select(0, ti) * w);
    }
  }
  for (int64_t s = 0; s < c.num_experts_per_tok; ++s) moe_out = moe_out + contrib[s];
  return moe_out;
}

std::pair<at::Tensor, at::Tensor> load_balance(const forward_result& r, int64_t num_experts) {
  const int64_t E = num_experts;
  if (r.experts.empty()) return {at::zeros({}, at::kFloat), at::zeros({0}, at::kFloat)};
  at::Tensor loss = at::zeros({}, r.router_probs[0].options());
  at::Tensor counts = at::zeros({E}, at::kFloat);
  for (size_t l = 0; l < r.experts.size(); ++l) {
    auto onehot = at::one_hot(r.experts[l], E).to(at::kFloat);  // [T, k, E]
    auto fraction = onehot.sum(1).mean(0);                      // tokens routed to e / tokens
    auto mean_prob = r.router_probs[l].mean(0);
    loss = loss + E * (fraction * mean_prob).sum();
    counts = counts + onehot.sum(at::IntArrayRef{0, 1}).to(at::kCPU);
  }
  return {loss / double(r.experts.size()), counts / counts.sum()};
}

}  // namespace milesrt::llm
