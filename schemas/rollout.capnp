# Parameters of the `rollout` actor kind (selected in a graph file by `params = (rollout = (...))`).
@0xe4b7c1d2a3f59b61;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("milesrt::schema");

using import "/milesrt/device.capnp".Device;
using import "/milesrt/device.capnp".Dtype;
using import "/milesrt/lora.capnp".Lora;

struct RolloutParams {
  model @0 :Text;
  # A Hugging Face model folder (config.json, safetensors, tokenizer.json for text prompts).
  device @1 :Device = cpu;
  dtype @2 :Dtype = fp32;
  kvBlocks @3 :UInt32 = 512;
  # KV cache blocks on the CPU (and on the GPU when kvMemoryFraction is 0).
  blockSize @4 :UInt32 = 16;
  stepTokens @5 :UInt32 = 512;
  # Tokens per engine step: prefill chunks and decode tokens share it.
  samplesPerPrompt @6 :UInt32 = 4;
  # n: the size of each sample group (GRPO's group).
  maxNewTokens @7 :UInt32 = 32;
  temperature @8 :Float64 = 1.0;
  topP @9 :Float64 = 1.0;
  topK @10 :UInt32 = 0;
  seed @11 :UInt64 = 0;
  pauseMode @12 :PauseMode = retract;
  chatTemplate @13 :Text;
  # A Jinja chat template file (.jinja) for chat prompts; "" = the model's own (tokenizer_config.json's
  # chat_template, else chat_template.jinja in the model folder).
  bos @14 :BosPolicy = auto;
  # BOS/EOS of prompts given as text (chat prompts get the template's own): auto = the convention of
  # the model's tokenizer class (Llama-family classes such as DeepSeek-V3's add BOS), config =
  # tokenizer_config.json's add_bos_token / add_eos_token, never = none.

  enum BosPolicy {
    auto @0;
    config @1;
    never @2;
  }
  kvMemoryFraction @15 :Float64 = 0.5;
  # On the GPU: the KV pool is this share of the device memory free once the weights are loaded
  # (the trainer of a colocated graph needs the rest); 0 = kvBlocks blocks.
  releaseKvWhenIdle @16 :Bool = false;
  # Colocated with a trainer on one GPU: when the engine has nothing in flight (a sync step's
  # rollout phase is over) its KV pool and decode graphs go back to the allocator, where the
  # trainer's step finds them; the next prompt takes the pool again and captures the graphs again
  # (rollout_kv_retake_seconds). Cached prefixes go with the pool (new weights flush them anyway).
  lora @18 :Lora;
  # LoRA (docs/lora.md): the same settings as the trainer's; the engine applies the adapters the
  # publisher sends (only they travel).
  trueOnPolicy @19 :Bool = false;
  # As the trainer's trueOnPolicy, which must be set alike (docs/metrics.md#trainrollout-agreement).

  enum PauseMode {
    abort @0;
    # Cut off the samples in flight; `aborted` says what becomes of them.
    retract @1;
    # Requeue them in the engine with their tokens; their KV is recomputed under the new weights.
    inPlace @2;
    # Keep going with the KV as it is; their tokens then carry mixed versions.
  }
  aborted @17 :AbortedSamples = drop;
  # With pauseMode = abort, what becomes of the samples a weight update cuts off (never do they reach
  # the reward or the trainer as finished):
  #   drop: their group is discarded (the driver counts it as `filtered`; the sync schedule admits
  #         another prompt in its place) and counted in rollout_aborted_samples and
  #         rollout_dropped_groups (totals since the start);
  #   resume: they continue under the new weights (partial rollout, as in slime/Miles): their tokens
  #         are kept with the version each was sampled under, their KV is computed again, and new
  #         tokens carry the new version; the group's staleness counts from its oldest token
  #         (rollout_resumed_samples counts them).

  enum AbortedSamples {
    drop @0;
    resume @1;
  }
}
