# PPO on the arithmetic example: the actors of graphs/grpo_sync.capnp plus a critic (value model)
# and a frozen reference model, with the trainer's gae estimator (gamma = lambda = 1: each token's
# advantage is the sample's reward minus the critic's value there). Synchronous schedule.
# Needs runs/arith/setup and runs/arith/sft_model (examples/arith/run.sh makes both).
@0x934423d7875fabb4;
using import "/milesrt/graph.capnp".Graph;

const graph :Graph = (
  name = "arith_ppo",
  description = "PPO (critic + GAE, KL to the SFT model) on arithmetic, synchronous",
  actors = [
    (name = "data", kind = "data",
     params = (data = (path = "runs/arith/setup/rl.jsonl", epochs = 0, seed = 2))),
    (name = "rollout", kind = "rollout",
     params = (rollout = (model = "runs/arith/sft_model", samplesPerPrompt = 8, maxNewTokens = 4,
                          temperature = 1.0, kvBlocks = 1024, blockSize = 16, stepTokens = 2048))),
    (name = "reward", kind = "math_reward"),
    (name = "reference", kind = "reference",
     params = (reference = (model = "runs/arith/sft_model", temperature = 1.0))),
    (name = "critic", kind = "critic",
     params = (critic = (model = "runs/arith/sft_model", lr = 1e-3, gradClip = 1.0,
                         valueClip = 0.2, gamma = 1.0, lambda = 1.0, trainBatch = 4))),
    # With a critic, groups whose rewards all agree still carry signal (reward - value): keep them.
    (name = "filter", kind = "group_filter", params = (groupFilter = (dynamicSampling = false))),
    (name = "trainer", kind = "trainer",
     params = (trainer = (model = "runs/arith/sft_model", objective = "rl", estimator = "gae",
                          gamma = 1.0, lambda = 1.0, klType = "k3", klCoef = 0.01,
                          lr = 5e-4, gradClip = 1.0, epsClip = 0.2,
                          evalData = "runs/arith/setup/heldout.jsonl", evalInterval = 10,
                          evalMaxNewTokens = 4, exportDir = "runs/arith/arith_ppo_model"))),
    (name = "publisher", kind = "publisher", params = (publisher = (transport = colocated))),
  ],
  edges = [
    (from = "data.prompts", to = "rollout.prompts"),
    (from = "rollout.groups", to = "reward.groups"),
    (from = "reward.scored", to = "reference.groups"),
    (from = "reference.groups", to = "critic.groups"),
    (from = "critic.groups", to = "filter.groups"),
    (from = "filter.groups", to = "trainer.batches"),
    (from = "filter.groups", to = "critic.train"),
    (from = "trainer.weights", to = "publisher.weights"),
    (from = "publisher.updates", to = "rollout.weights"),
  ],
  schedule = (sync = void),
  run = (steps = 100, batchSize = 32, seed = 1, dir = "runs/arith/arith_ppo",
         progressMetric = "eval_accuracy",
         plot = ["reward_mean", "accuracy", "eval_accuracy", "critic_loss", "critic_value_mean"]),
);
