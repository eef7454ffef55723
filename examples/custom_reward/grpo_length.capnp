# GRPO with the plugin's length_reward instead of math_reward: the arithmetic example's RL stage
# (setup from examples/arith), rewarding completions whose length is near target_length tokens.
@0xe1f2a3b4c5d6e7f8;
using import "/milesrt/graph.capnp".Graph;

const graph :Graph = (
  name = "grpo_length",
  plugins = ["libmilesrt_custom_reward.so"],
  actors = [
    (name = "data", kind = "data", params = (data = (path = "runs/arith/setup/rl.jsonl"))),
    (name = "rollout", kind = "rollout",
     params = (rollout = (model = "runs/arith/sft_model", samplesPerPrompt = 8, maxNewTokens = 4))),
    (name = "reward", kind = "length_reward",
     params = (custom = [(name = "target_length", value = (int = 3)),
                         (name = "scale", value = (float = 2.0))])),
    (name = "filter", kind = "group_filter"),
    (name = "trainer", kind = "trainer",
     params = (trainer = (model = "runs/arith/sft_model", objective = rl, lr = 5e-4))),
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
  run = (steps = 20, batchSize = 16, seed = 1, dir = "runs/grpo_length", progressMetric = "reward_mean"),
);
