# Parameters of the `trainer` actor kind (the learner): `params = (trainer = (...))`.
@0xd3a1b2c4e5f60718;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("milesrt::schema");

using import "/milesrt/device.capnp".Device;
using import "/milesrt/device.capnp".Dtype;
using import "/milesrt/lora.capnp".Lora;

struct TrainerParams {
  model @0 :Text;
  # The Hugging Face model folder training starts from (config.json + safetensors).
  device @1 :Device = cpu;
  dtype @2 :Dtype = fp32;
  # fp32, or bf16 (bf16 weights with fp32 master weights and optimizer state).
  objective @3 :Objective = rl;
  # rl: policy-gradient on scored groups; sft: cross-entropy on prompt/response pairs.

  # Advantage estimator, by name in the trainer's estimator registry: grpo (divides by the group's
  # standard deviation), dr_grpo (Dr.GRPO: does not), rloo, reinforce_pp, reinforce_pp_baseline,
  # gae; plugins add more.
  estimator @4 :Text = "grpo";
  gamma @6 :Float64 = 1.0;
  lambda @7 :Float64 = 1.0;

  # Policy loss.
  epsClip @8 :Float64 = 0.2;
  epsClipHigh @9 :Float64 = 0;
  # Upper clip (DAPO clip-higher); 0 = epsClip.
  dualClipC @10 :Float64 = 0;
  # Dual-clip constant c > 1; 0 = off.
  policyLoss @11 :Text = "ppo";
  # The surrogate, by name in the trainer's loss registry: ppo (per-token ratio), gspo (GSPO's
  # sequence ratio); plugins add more.
  aggregation @12 :Aggregation = tokenMean;
  constantNormalizer @13 :Float64 = 1.0;
  klType @14 :KlType = none;
  klCoef @15 :Float64 = 0;
  klInReward @16 :Bool = false;
  # KL as a per-token reward penalty instead of a loss term.
  entropyCoef @17 :Float64 = 0;
  tis @18 :Bool = false;
  # Truncated importance sampling: weight clamp(exp(old - rollout), tisLow, tisHigh).
  tisLow @19 :Float64 = 0;
  tisHigh @20 :Float64 = 2;
  mis @21 :Mis = none;
  # Masked importance sampling.
  misLow @22 :Float64 = 0.5;
  misHigh @23 :Float64 = 2;
  useRolloutLogprobs @24 :Bool = false;
  # Use the rollout's log-probs as the old policy's (skips the old-policy forward).
  distillCoef @25 :Float64 = 0;
  # On-policy distillation: + distillCoef x the per-token reverse KL to a teacher, over the sampled
  # tokens (multi-turn masks respected), with the teacher's log-probs from a `teacher` actor
  # (teacher_logprobs, apart from the KL reference's ref_logprobs: both terms can be on at once).
  distillEstimator @56 :KlType = k1;
  # k1: sg(logp - teacher) x logp, the score-function form whose expected gradient is the reverse
  # KL's (logp - teacher is a per-token advantage); k3: exp(teacher - logp) - 1 - (teacher - logp)
  # differentiated directly, lower variance (its expected value is the reverse KL; its expected
  # gradient is the forward KL's); k2: 0.5 (logp - teacher)^2. Not none.
  routingReplay @26 :Bool = true;
  # MoE: the training forward uses the experts the rollout recorded.
  temperature @27 :Float64 = 1.0;
  # Must match the rollout's sampling temperature.

  # Optimizer.
  lr @28 :Float64 = 1e-5;
  weightDecay @29 :Float64 = 0.0;
  beta1 @30 :Float64 = 0.9;
  beta2 @31 :Float64 = 0.999;
  adamEps @32 :Float64 = 1e-8;
  gradClip @33 :Float64 = 1.0;
  # Global grad-norm clip; 0 = off.
  warmupSteps @34 :UInt32 = 0;
  lrSchedule @35 :LrSchedule = constant;
  minLr @36 :Float64 = 0;
  microBatchTokens @37 :UInt32 = 4096;
  # Micro-batches are packed up to this many tokens; gradients accumulate over them.
  updatesPerStep @38 :UInt32 = 1;
  # Optimizer steps per batch (mini-batches); > 1 makes the PPO ratio move.
  activationCheckpointing @39 :Bool = false;
  checkpointLayers @48 :UInt32 = 0;
  # With activationCheckpointing: how many layers, from the first, are computed again in the
  # backward (selective checkpointing: the later layers keep their activations); 0 = all.
  lora @49 :Lora;
  # LoRA (docs/lora.md): set, only the adapters train, are checkpointed and published; the base
  # model stays frozen.
  loraBaseReference @57 :Bool = false;
  # With lora: the base (the adapters off) is the KL reference (klType, klInReward) of samples
  # that carry no ref_logprobs (no `reference` actor). Off, such a batch is refused: the graph
  # says where its reference comes from.

  # Data parallelism (docs/distributed.md).
  dataParallel @50 :UInt32 = 1;
  # Trainer ranks: threads of this process, one intra-op thread each, meeting through a c10d TCP
  # store; each step's micro-batches are split between them by tokens, the gradients summed
  # (Gloo), and every rank takes the same step. Rank 0 publishes, evaluates and exports.
  storeHost @51 :Text = "127.0.0.1";
  # Where rank 0's store listens (the ranks' rendezvous); loopback by default.
  storePort @52 :UInt16 = 0;
  # The store's port; 0 = a free one, chosen when the trainer starts.
  rankTimeoutSeconds @53 :Float64 = 120;
  # How long the ranks wait for each other: to join the group, and in one collective (a rank that
  # died mid-step ends the step with an error naming it).
  shardOptimizer @54 :Bool = false;
  # ZeRO-1: with dataParallel > 1 each rank keeps 1/N of the fp32 master weights and AdamW
  # moments; gradients are reduce-scattered and the updated weights all-gathered. Checkpoints are
  # written per shard and resume only with the same dataParallel.

  # Train/rollout agreement (docs/metrics.md#trainrollout-agreement).
  logprobDiffAlarm @55 :Float64 = 0.5;
  # A warning line on stderr, and the metrics logprob_diff_alarm (this step) and
  # logprob_diff_alarms (since the trainer started), when a step's
  # train_rollout_logprob_abs_diff_max_held (nats, over the tokens sampled under the weights the
  # trainer holds) exceeds this; 0 = off. Not with trueOnPolicy, where any difference is an error.
  trueOnPolicy @5 :Bool = false;
  # The rollout's log-prob of every token sampled under the weights the trainer holds must equal
  # the trainer's bit for bit; a step where one does not fails, naming the difference. Set it on
  # the rollout too (validation refuses a graph where they differ). CPU only for now: the CPU
  # paths agree exactly; on CUDA the batch-invariant kernels it needs are not built.

  # Held-out evaluation (greedy decoding, answers checked like the math reward).
  evalData @40 :Text;
  # A JSONL file (keys as the data actor's defaults: prompt, label); relative to the working dir.
  evalInterval @41 :UInt32 = 0;
  # Steps between evaluations; 0 = never.
  evalMaxNewTokens @42 :UInt32 = 16;
  evalPatience @43 :UInt32 = 0;
  # Stop the run when held-out accuracy has not improved for this many evaluations; 0 = never.
  exportDir @44 :Text;
  # Where the best-evaluated model (or, without evaluation, the last) is written as an HF folder.
  evalLimit @45 :UInt32 = 0;
  # Evaluate on the first N items only; 0 = all.
  chatTemplate @46 :Text;
  # For evalData items with messages; as the rollout's.
  evalMinSteps @47 :UInt32 = 0;
  # evalPatience counts evaluations from this step on: early accuracy near zero is noise, not a
  # plateau.

  enum Objective {
    rl @0;
    sft @1;
  }

  enum Aggregation {
    # How the per-token policy loss becomes one number.
    tokenMean @0;
    # Over all tokens of the batch.
    seqMeanTokenSum @1;
    # Sum over each sequence's tokens, mean over sequences.
    seqMeanTokenMean @2;
    # Mean over each sequence's tokens, mean over sequences.
    constant @3;
    # Sum over all tokens divided by constantNormalizer times the sequences (Dr.GRPO).
  }

  enum KlType {
    none @0;
    k1 @1;
    k2 @2;
    k3 @3;
    # Low-variance.
  }

  enum Mis {
    none @0;
    token @1;
    # Mask tokens whose ratio exp(old - rollout) is outside [misLow, misHigh].
    sequence @2;
    # Mask whole sequences whose ratio (the exp of the summed log-ratios) is outside it.
  }

  enum LrSchedule {
    constant @0;
    cosine @1;
    # To minLr over the run's steps.
  }
}
