# The arithmetic example's GRPO stage trained with the plugin's vanilla_pg policy loss (plain
# REINFORCE on GRPO advantages) instead of the built-in clipped ppo surrogate.
@0xc4d5e6f708192a3b;
using import "/milesrt/graph.capnp".Graph;

const graph :Graph = (
  name = "grpo_vanilla_pg",
  plugins = ["libmilesrt_custom_loss.so"],
  actors = [
    (name = "data", kind = "data", params = (data = (path = "runs/arith/setup/rl.jsonl", epochs = 0))),
    (name = "rollout", kind = "rollout",
     params = (rollout = (model = "runs/arith/sft_model", samplesPerPrompt = 8, maxNewTokens = 4))),
    (name = "reward", kind = "math_reward"),
    (name = "filter", kind = "group_filter"),
    (name = "trainer", kind = "trainer",
     params = (trainer = (model = "runs/arith/sft_model", objective = rl, policyLoss = "vanilla_pg",
                          lr = 5e-4))),
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
  run = (steps = 20, batchSize = 16, seed = 1, dir = "runs/grpo_vanilla_pg", progressMetric = "reward_mean"),
);
