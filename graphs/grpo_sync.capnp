# GRPO in lockstep: each step generates under weight version k, scores, trains and publishes k+1.
# The dataflow of one step:
#   data -> rollout -> reward -> buffer -> trainer -> publisher -> (rollout's weights)
@0xc9d1e2f3a4b5c6d7;
using import "/milesrt/graph.capnp".Graph;

const graph :Graph = (
  name = "grpo_sync",
  description = "GRPO, synchronous schedule",
  actors = [
    (name = "data", kind = "data"),
    (name = "rollout", kind = "rollout"),
    (name = "reward", kind = "reward"),
    (name = "buffer", kind = "buffer"),
    (name = "trainer", kind = "trainer"),
    (name = "publisher", kind = "publisher"),
  ],
  edges = [
    (from = "data.prompts", to = "rollout.prompts"),
    (from = "rollout.groups", to = "reward.groups"),
    (from = "reward.scored", to = "buffer.scored"),
    (from = "buffer.batches", to = "trainer.batches"),
    (from = "trainer.weights", to = "publisher.weights"),
    (from = "publisher.updates", to = "rollout.weights"),
  ],
  schedule = (sync = void),
  run = (steps = 20, seed = 1, dir = "runs/grpo_sync", progressMetric = "reward_mean"),
);
