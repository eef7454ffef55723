# Stage 2 of the arithmetic example with LoRA (docs/lora.md): grpo_sync.capnp's actors, but the
# base model from SFT stays frozen and only rank-8 adapters on every projection train. The
# trainer's optimizer, master weights and checkpoints hold the adapters alone, and each version
# the publisher hands the engine is the adapters' flat buffer (the colocated engine applies them
# at run time, unmerged, so its log-probs equal the trainer's bit for bit on the CPU). The rollout's
# `lora` must equal the trainer's. The exported model is the base with the adapters merged in.
@0xeaf8321112fe56bc;
using import "/milesrt/graph.capnp".Graph;

const graph :Graph = (
  name = "grpo_lora",
  description = "GRPO on arithmetic with LoRA adapters, synchronous (inputs: runs/arith/setup and runs/arith/sft_model, steps 1 and 2 of examples/arith/run.sh)",
  actors = [
    (name = "data", kind = "data",
     params = (data = (path = "runs/arith/setup/rl.jsonl", epochs = 0, seed = 2))),
    (name = "rollout", kind = "rollout",
     params = (rollout = (model = "runs/arith/sft_model", samplesPerPrompt = 8, maxNewTokens = 4,
                          temperature = 1.0, kvBlocks = 1024, blockSize = 16, stepTokens = 2048,
                          lora = (rank = 8, alpha = 16,
                                  targetModules = ["q_proj", "k_proj", "v_proj", "o_proj",
                                                   "gate_proj", "up_proj", "down_proj"])))),
    (name = "reward", kind = "math_reward"),
    (name = "filter", kind = "group_filter"),
    (name = "trainer", kind = "trainer",
     params = (trainer = (model = "runs/arith/sft_model", objective = rl, estimator = "grpo",
                          lr = 5e-3, lrSchedule = cosine, minLr = 2.5e-4, gradClip = 1.0,
                          epsClip = 0.2,
                          lora = (rank = 8, alpha = 16,
                                  targetModules = ["q_proj", "k_proj", "v_proj", "o_proj",
                                                   "gate_proj", "up_proj", "down_proj"]),
                          evalData = "runs/arith/setup/heldout.jsonl", evalInterval = 10,
                          evalMaxNewTokens = 4, exportDir = "runs/arith/grpo_lora_model"))),
    (name = "publisher", kind = "publisher", params = (publisher = (transport = colocated))),
  ],
  edges = [
    (from = "data.prompts", to = "rollout.prompts"),
    (from = "rollout.groups", to = "reward.groups"),
    (from = "reward.scored", to = "filter.groups"),
    (from = "filter.groups", to = "trainer.batches"),
    (from = "trainer.weights", to = "publisher.weights"),
    (from = "publisher.updates", to = "rollout.weights"),
  ],
  schedule = (sync = void),
  run = (steps = 100, batchSize = 32, seed = 1, dir = "runs/arith/grpo_lora",
         progressMetric = "eval_accuracy", plot = ["reward_mean", "accuracy", "eval_accuracy", "entropy"]),
);
