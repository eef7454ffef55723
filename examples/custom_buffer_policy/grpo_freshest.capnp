# The arithmetic example's async GRPO stage with the plugin's `freshest` buffer policy: the
# trajectory buffer serves the groups of the newest model version first and discards what lags the
# learner by more than maxStaleness (graphs/grpo_buffer.capnp is the same graph with a built-in policy).
# Run it after examples/arith/run.sh made the SFT model:
#   build/milesrt run examples/custom_buffer_policy/grpo_freshest.capnp
@0xa3f1c5e7d9b20468;
using import "/milesrt/graph.capnp".Graph;

const graph :Graph = (
  name = "grpo_freshest",
  description = "GRPO on arithmetic, asynchronous, with the freshest buffer policy from a plugin (inputs: runs/arith/setup and runs/arith/sft_model, steps 1 and 2 of examples/arith/run.sh)",
  plugins = ["libmilesrt_custom_buffer_policy.so"],
  actors = [
    (name = "data", kind = "data",
     params = (data = (path = "runs/arith/setup/rl.jsonl", epochs = 0, seed = 2))),          # PATH
    (name = "rollout", kind = "rollout",
     params = (rollout = (model = "runs/arith/sft_model", samplesPerPrompt = 8, maxNewTokens = 4,  # PATH
                          temperature = 1.0, kvBlocks = 1024, blockSize = 16, stepTokens = 2048))),
    (name = "reward", kind = "math_reward"),
    (name = "buffer", kind = "trajectory_buffer",
     params = (trajectoryBuffer = (policy = "freshest", maxStaleness = 1))),
    (name = "trainer", kind = "trainer",
     params = (trainer = (model = "runs/arith/sft_model", objective = rl, estimator = "grpo",  # PATH
                          lr = 1e-3, lrSchedule = cosine, minLr = 5e-5, gradClip = 1.0, epsClip = 0.2,
                          tis = true,
                          evalData = "runs/arith/setup/heldout.jsonl", evalInterval = 10,     # PATH
                          evalMaxNewTokens = 4, exportDir = "runs/arith/grpo_freshest_model"))), # PATH
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
  run = (steps = 100, batchSize = 32, seed = 1, dir = "runs/grpo_freshest",               # PATH
         progressMetric = "eval_accuracy",
         plot = ["reward_mean", "eval_accuracy", "buffer_served_spread_mean", "buffer_size"]),
);
