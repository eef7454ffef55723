#pragma once
/// One forward of the decoder (decoder::forward) as the code that runs it sees it: the inputs on
/// the device, the paths they take and the decoder's blocks over them. Shared by forward.cpp (the
/// layers, attention, activation checkpointing) and forward_moe.cpp (mixtures of experts) alone.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "actors/lib/llm/invariant_ops.hpp"
#include "actors/lib/llm/lora.hpp"
#include "actors/lib/llm/model.hpp"
#include "actors/lib/llm/row_ops.hpp"
#include "actors/lib/llm/train_ops.hpp"

namespace milesrt::llm {

/// The packed training batch's cumulative sequence lengths for variable-length attention
/// (undefined where the training path does not use it).
struct varlen_batch {
  at::Tensor cu_seqlens;  ///< [segments + 1] int32 on the device
  int64_t max_len = 0;
  double scale = 1;
};

/// One forward's inputs on the device, the paths they take (the paged serving batch, the training
/// path's variable-length attention and kernels), and the decoder's blocks over them.
struct forward_pass {
  forward_pass(const model_config& config, const flat_params& params,
               const std::vector<segment>& segs, const forward_options& options, at::Device dev,
               at::ScalarType type, const at::Tensor& inv_freq, bool batch_invariant);

  /// The residual stream between blocks: h and the last block's output `delta` (undefined: none),
  /// which the next norm adds to h (in the same pass on the training kernels).
  struct residual {
    at::Tensor h, delta;
  };
  /// One decoder layer: the stream at its input -> at its output. `record` keeps the MoE routing
  /// in the result (off when a checkpointed layer is computed again).
  residual run_layer(int64_t layer, residual s, bool record);
  at::Tensor norm(const at::Tensor& x, const at::Tensor& w) const {
    return train_kernels ? train_ops::rms_norm(x, w, c.rms_norm_eps)
                         : row_ops::rms_norm(x, w, c.rms_norm_eps);
  }
  /// s.h += s.delta (when pending), then RMSNorm(s.h) * w.
  at::Tensor add_norm(residual& s, const at::Tensor& w) const {
    if (!s.delta.defined()) return norm(s.h, w);
    if (train_kernels) {
      auto [sum, y] = train_ops::add_rms_norm(s.h, s.delta, w, c.rms_norm_eps);
      s = {sum, at::Tensor()};
      return y;
    }
    s = {s.h + s.delta, at::Tensor()};
    return norm(s.h, w);
  }
  /// The embedding rows of the tokens.
  at::Tensor embed_rows() const {
    const auto& e = P.get("model.embed_tokens.weight");
    return train_kernels ? train_ops::embedding(e, ids) : e.index_select(0, ids);
  }
  at::Tensor linear(const at::Tensor& x, const at::Tensor& w) const {
    return train_kernels ? train_ops::linear(x, w, invariant) : row_ops::linear_rows(x, w);
  }
  /// y, the projection `module` of x, plus its LoRA term when the module is adapted.
  at::Tensor adapted(at::Tensor y, int64_t layer, const char* module, const at::Tensor& x) const {
    auto d = lora_delta(lora, layer, module, x);
    return d.defined() ? y + d : y;
  }

  const model_config& c;
  const flat_params& P;
  const std::vector<segment>& segments;
  const forward_options& opt;
  const at::Device device;
  const at::ScalarType dtype;
  int64_t T = 0;   ///< tokens
  int64_t Tp = 0;  ///< rows: on the CPU T padded to a multiple of 8 (at least 8)
  bool paged = false;
  paged_step batch;     ///< the paged serving batch (when `paged`)
  at::Tensor ids, pos;  ///< [Tp] int64 on the device
  std::pair<at::Tensor, at::Tensor> rope;
  varlen_batch varlen;
  bool train_kernels = false;
  bool invariant = false;           ///< the true on-policy mode on CUDA (invariant_ops.hpp)
  invariant_ops::packed_keys keys;  ///< its packed training batch (no cache)
  lora_view lora;                   ///< the adapters this forward applies (none: the base)
  forward_result result;

 private:
  /// The router's choice for a MoE layer: probabilities [Tp, E], top-k weights and experts [Tp, k].
  struct routing {
    at::Tensor probs, weights, chosen;
  };

  at::Tensor rotate(const at::Tensor& x) const {
    return train_kernels ? train_ops::rope(x, rope.first, rope.second)
                         : row_ops::apply_rope(x, rope);
  }
  at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up) const {
    return train_kernels ? train_ops::silu_mul(gate, up) : at::silu(gate) * up;
  }
  /// The layer's self-attention of the stream's norm (which takes in its pending delta).
  at::Tensor attention(int64_t layer, const std::string& p, residual& s) const;
  at::Tensor segment_attention(int64_t layer, const at::Tensor& q, const at::Tensor& k,
                               const at::Tensor& v) const;
  /// The dense MLP of x (the post-attention norm's output).
  at::Tensor dense_ffn(int64_t layer, const std::string& p, const at::Tensor& x) const;
  /// The mixture of experts of x (the post-attention norm's output).
  at::Tensor moe_ffn(int64_t layer, const std::string& p, const at::Tensor& x, bool record);
  routing route(int64_t layer, const std::string& p, const at::Tensor& x) const;
  at::Tensor moe_by_expert(int64_t layer, const std::string& p, const at::Tensor& x,
                           const routing& r) const;
};

}  // namespace milesrt::llm
