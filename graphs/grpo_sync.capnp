# Stage 2 of the arithmetic example: GRPO from the SFT model, synchronous schedule. Each step the
# rollout samples a group of completions per prompt under version k, the math reward checks them
# against the true sums, groups whose samples all agree are dropped (no signal), the trainer
# takes a GRPO step and the colocated publisher hands version k+1 to the engine (handover =
# share, the default: the engine reads the trainer's own weights and nothing is copied, which the
# sync schedule allows since the trainer waits until the version is published).
@0xf4433c33f532258d;
using import "/milesrt/graph.capnp".Graph;

const graph :Graph = (
  name = "grpo_sync",
  description = "GRPO on arithmetic, synchronous (inputs: runs/arith/setup and runs/arith/sft_model, steps 1 and 2 of examples/arith/run.sh)",
  actors = [
    (name = "data", kind = "data",
     params = (data = (path = "runs/arith/setup/rl.jsonl", epochs = 0, seed = 2))),
    (name = "rollout", kind = "rollout",
     params = (rollout = (model = "runs/arith/sft_model", samplesPerPrompt = 8, maxNewTokens = 4,
                          temperature = 1.0, kvBlocks = 1024, blockSize = 16, stepTokens = 2048))),
    (name = "reward", kind = "math_reward"),
    (name = "filter", kind = "group_filter"),
    (name = "trainer", kind = "trainer",
     params = (trainer = (model = "runs/arith/sft_model", objective = rl, estimator = "grpo",
                          lr = 1e-3, lrSchedule = cosine, minLr = 5e-5, gradClip = 1.0, epsClip = 0.2,
                          evalData = "runs/arith/setup/heldout.jsonl", evalInterval = 10,
                          evalMaxNewTokens = 4, exportDir = "runs/arith/grpo_model"))),
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
  run = (steps = 100, batchSize = 32, seed = 1, dir = "runs/arith/grpo_sync",
         progressMetric = "eval_accuracy", plot = ["reward_mean", "accuracy", "eval_accuracy", "entropy"]),
);
