# GRPO on two datasets mixed by weight: 70% of each step's prompts from the arithmetic RL set, 30%
# from the SFT set's problems (rewarded by their true sums, not by the teacher's answers). Both data
# actors feed rollout.prompts; the driver shares every admission out by the sources' `weight`
# (a smooth weighted round robin, kept in checkpoints), and metrics.jsonl's "sources" counts each
# batch's items per source. Otherwise the same graph as grpo_sync.capnp (run examples/arith/run.sh
# first for runs/arith/setup and runs/arith/sft_model).
@0xa3b1c2d4e5f60718;
using import "/milesrt/graph.capnp".Graph;

const graph :Graph = (
  name = "grpo_mix",
  description = "GRPO on two datasets mixed 70/30, synchronous (inputs: runs/arith/setup and runs/arith/sft_model, steps 1 and 2 of examples/arith/run.sh)",
  actors = [
    (name = "arith", kind = "data", weight = 0.7,
     params = (data = (path = "runs/arith/setup/rl.jsonl", epochs = 0, seed = 2))),
    (name = "sft_prompts", kind = "data", weight = 0.3,
     params = (data = (path = "runs/arith/setup/sft.jsonl", epochs = 0, seed = 3))),
    (name = "rollout", kind = "rollout",
     params = (rollout = (model = "runs/arith/sft_model", samplesPerPrompt = 8, maxNewTokens = 4,
                          temperature = 1.0, kvBlocks = 1024, blockSize = 16, stepTokens = 2048))),
    (name = "reward", kind = "math_reward"),
    (name = "filter", kind = "group_filter"),
    (name = "trainer", kind = "trainer",
     params = (trainer = (model = "runs/arith/sft_model", objective = rl, estimator = "grpo",
                          lr = 1e-3, lrSchedule = cosine, minLr = 5e-5, gradClip = 1.0, epsClip = 0.2,
                          evalData = "runs/arith/setup/heldout.jsonl", evalInterval = 10,
                          evalMaxNewTokens = 4, exportDir = "runs/arith/grpo_mix_model"))),
    (name = "publisher", kind = "publisher", params = (publisher = (transport = colocated))),
  ],
  edges = [
    (from = "arith.prompts", to = "rollout.prompts"),
    (from = "sft_prompts.prompts", to = "rollout.prompts"),
    (from = "rollout.groups", to = "reward.groups"),
    (from = "reward.scored", to = "filter.groups"),
    (from = "filter.groups", to = "trainer.batches"),
    (from = "trainer.weights", to = "publisher.weights"),
    (from = "publisher.updates", to = "rollout.weights"),
  ],
  schedule = (sync = void),
  run = (steps = 100, batchSize = 32, seed = 1, dir = "runs/arith/grpo_mix",
         progressMetric = "eval_accuracy", plot = ["reward_mean", "accuracy", "eval_accuracy", "entropy"]),
);
