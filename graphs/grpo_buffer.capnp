# GRPO on arithmetic, asynchronous, with the trajectory buffer as an actor between scoring and
# learning: the driver puts every scored group into `buffer` and takes each batch from it, and the
# buffer's policy picks the batch. Here `priority`: the groups with the largest reward spread (the
# most GRPO signal) first; there is no group_filter, so groups whose samples all agree are kept but
# wait behind those that teach something (past maxStaleness they are dropped, and counted). The schedule keeps admission (at most maxStaleness + 1 batches open);
# the buffer keeps the groups, and its groups and counters are in every checkpoint.
#
#   data ─▶ rollout ─▶ reward ─▶ buffer ─▶ trainer ─▶ publisher ─▶ rollout.weights
#
# Policies: fifo (arrival order; the same run as grpo_async.capnp's queue), staleness (past
# maxStaleness: onStale = drop discards, wait keeps it behind fresher groups; counted either way),
# priority, or one a plugin registers (docs/extending.md).
# Run it (after examples/arith/run.sh made the SFT model):
#   build/milesrt run graphs/grpo_buffer.capnp [--set buffer.policy=staleness]
@0xb5c0e3d2f1a49786;
using import "/milesrt/graph.capnp".Graph;

const graph :Graph = (
  name = "grpo_buffer",
  description = "GRPO on arithmetic, asynchronous, with a priority trajectory buffer (inputs: runs/arith/setup and runs/arith/sft_model, steps 1 and 2 of examples/arith/run.sh)",
  actors = [
    (name = "data", kind = "data",
     params = (data = (path = "runs/arith/setup/rl.jsonl", epochs = 0, seed = 2))),          # PATH
    (name = "rollout", kind = "rollout",
     params = (rollout = (model = "runs/arith/sft_model", samplesPerPrompt = 8, maxNewTokens = 4,  # PATH
                          temperature = 1.0, kvBlocks = 1024, blockSize = 16, stepTokens = 2048))),
    (name = "reward", kind = "math_reward"),
    (name = "buffer", kind = "trajectory_buffer",
     params = (trajectoryBuffer = (policy = "priority", maxStaleness = 1))),
    (name = "trainer", kind = "trainer",
     params = (trainer = (model = "runs/arith/sft_model", objective = rl, estimator = "grpo",  # PATH
                          lr = 1e-3, lrSchedule = cosine, minLr = 5e-5, gradClip = 1.0, epsClip = 0.2,
                          tis = true,
                          evalData = "runs/arith/setup/heldout.jsonl", evalInterval = 10,     # PATH
                          evalMaxNewTokens = 4, exportDir = "runs/arith/grpo_buffer_model"))), # PATH
    (name = "publisher", kind = "publisher",
     params = (publisher = (transport = colocated, handover = copy, keepVersions = 4))),
  ],
  edges = [
    (from = "data.prompts", to = "rollout.prompts"),
    (from = "rollout.groups", to = "reward.groups"),
    (from = "reward.scored", to = "buffer.groups"),
    (from = "buffer.groups", to = "trainer.batches"),
    (from = "trainer.weights", to = "publisher.weights"),
    (from = "publisher.updates", to = "rollout.weights"),
  ],
  schedule = (async = (maxStaleness = 1)),
  run = (steps = 100, batchSize = 32, seed = 1, dir = "runs/arith/grpo_buffer",               # PATH
         progressMetric = "eval_accuracy",
         plot = ["reward_mean", "eval_accuracy", "buffer_served_spread_mean", "buffer_size"]),
);
