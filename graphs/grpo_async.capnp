# Stage 2 of the arithmetic example, asynchronous: the same actors as grpo_sync.capnp; the
# schedule block differs, and so does the publisher's handover. Generation runs ahead of training
# by at most one version, so the trainer trains while a version is being published: with
# handover = copy the trainer's process keeps an immutable copy of each version (one flat copy),
# which the colocated engine adopts. (handover = share, the sync graph's default, would hand the
# engine the very buffer the trainer is changing.)
@0xd77a2c0e1b5f4a93;
using import "/milesrt/graph.capnp".Graph;

const graph :Graph = (
  name = "grpo_async",
  description = "GRPO on arithmetic, bounded-staleness asynchronous (inputs: runs/arith/setup and runs/arith/sft_model, steps 1 and 2 of examples/arith/run.sh)",
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
                          tis = true,
                          evalData = "runs/arith/setup/heldout.jsonl", evalInterval = 10,
                          evalMaxNewTokens = 4, exportDir = "runs/arith/grpo_async_model"))),
    (name = "publisher", kind = "publisher",
     params = (publisher = (transport = colocated, handover = copy, keepVersions = 4))),
  ],
  edges = [
    (from = "data.prompts", to = "rollout.prompts"),
    (from = "rollout.groups", to = "reward.groups"),
    (from = "reward.scored", to = "filter.groups"),
    (from = "filter.groups", to = "trainer.batches"),
    (from = "trainer.weights", to = "publisher.weights"),
    (from = "publisher.updates", to = "rollout.weights"),
  ],
  schedule = (async = (maxStaleness = 1)),
  run = (steps = 100, batchSize = 32, seed = 1, dir = "runs/arith/grpo_async",
         progressMetric = "eval_accuracy", plot = ["reward_mean", "accuracy", "eval_accuracy", "entropy"]),
);
