# LoRA settings shared by the `trainer` and `rollout` kinds' params (docs/lora.md):
# `params = (trainer = (..., lora = (rank = 16, alpha = 32, targetModules = [...])))`. Setting the
# struct at all turns LoRA on; the rollout's must equal its trainer's (rank, alpha, modules).
@0xd65d0db44f07fb93;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("milesrt::schema");

struct Lora {
  rank @0 :UInt32 = 8;
  # r: each adapted projection W [out, in] gets A [r, in] and B [out, r]. 1 to 4096.
  alpha @1 :Float64 = 16;
  # The adapters' output is scaled by alpha / rank (alpha / sqrt(rank) with useRslora). > 0.
  dropout @2 :Float64 = 0;
  # Dropout on the adapters' input in the trainer's gradient forward only, in [0, 1).
  useRslora @3 :Bool = false;
  targetModules @4 :List(Text) = ["q_proj", "v_proj"];
  # Which projections of every layer: q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj,
  # down_proj (peft's default for Qwen and Llama is q_proj and v_proj). On a MoE model the MLP
  # names are refused: its experts are adapted through targetParameters.
  seed @5 :UInt64 = 0;
  # The adapters' initialisation (A kaiming-uniform from this seed, B zero, as peft does).
  merge @6 :Bool = false;
  # rollout only: serve a copy of the base with the adapters merged in (W + scale B A) instead of
  # applying them at run time; its log-probs then differ from the trainer's by rounding.
  adapter @7 :Text;
  # A peft adapter folder (adapter_config.json + adapter_model.safetensors) to start from instead
  # of `seed`'s initialisation: its r, lora_alpha, use_rslora, target_modules and
  # target_parameters must equal rank, alpha, useRslora, targetModules and targetParameters here
  # (validation names a field that differs). The trainer and the rollout name the same folder.
  targetParameters @8 :List(Text);
  # The fused expert tensors of MoE layers, as peft's target_parameters names them:
  # "mlp.experts.gate_up_proj", "mlp.experts.down_proj". Each gets A [rank * E, in] and B
  # [out, rank * E] (peft's ParamWrapper layout, docs/lora.md); dropout must be 0. Empty: none.
}
