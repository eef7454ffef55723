# GRPO on multi-turn episodes of an environment (docs/environments.md): the data source gives
# tasks, the environment runs `samplesPerPrompt` episodes of each against the rollout (its service edge
# `env.generate -> rollout.generate`: every turn sampled by the engine, under its weight
# versions), the group filter drops groups whose episodes all scored alike, the trainer trains
# on the episodes' tokens with masks (the model's tokens only) and the publisher hands each new
# version back to the rollout. The defaults are the calculator-agent example's
# (examples/agent_calc/run.sh): arithmetic with a `calculate` tool, held-out success evaluated
# every 10 versions with the tool and without it, sampled as in training (evalTemperature = 1: what
# the policy does, not only its most likely first move).
@0xddde8bcb6afbc2d3;
using import "/milesrt/graph.capnp".Graph;

const graph :Graph = (
  name = "agent_env",
  description = "GRPO on calculator-tool episodes run inside the graph (inputs: runs/agent_calc/setup and runs/agent_calc/sft_model, steps 1 and 2 of examples/agent_calc/run.sh)",
  actors = [
    (name = "data", kind = "data",
     params = (data = (path = "runs/agent_calc/setup/rl.jsonl", epochs = 0, seed = 2))),
    (name = "env", kind = "environment",
     params = (environment = (environment = "calculator", options = "{\"tool\": true}",
                              model = "runs/agent_calc/sft_model", samplesPerPrompt = 8,
                              maxTurns = 4, maxTokens = 64, maxSeconds = 60, maxNewTokens = 12,
                              evalData = "runs/agent_calc/setup/heldout.jsonl", evalInterval = 10,
                              evalTemperature = 1.0, evalOptions = "{\"tool\": false}"))),
    (name = "rollout", kind = "rollout",
     params = (rollout = (model = "runs/agent_calc/sft_model", samplesPerPrompt = 1,
                          maxNewTokens = 12, kvBlocks = 2048, blockSize = 16, stepTokens = 4096))),
    (name = "filter", kind = "group_filter"),
    (name = "trainer", kind = "trainer",
     params = (trainer = (model = "runs/agent_calc/sft_model", objective = rl, estimator = "grpo",
                          lr = 1e-3, gradClip = 1.0, epsClip = 0.2,
                          exportDir = "runs/agent_calc/grpo_model"))),
    (name = "publisher", kind = "publisher", params = (publisher = (transport = colocated))),
  ],
  edges = [
    (from = "data.prompts", to = "env.prompts"),
    (from = "env.groups", to = "filter.groups"),
    (from = "env.generate", to = "rollout.generate"),
    (from = "filter.groups", to = "trainer.batches"),
    (from = "trainer.weights", to = "publisher.weights"),
    (from = "publisher.updates", to = "rollout.weights"),
  ],
  schedule = (sync = void),
  # Step 31 samples under version 30, so the last evaluation (every 10) sees 30 trained steps.
  run = (steps = 31, batchSize = 16, seed = 1, dir = "runs/agent_calc/grpo",
         plot = ["reward_mean", "env_tool_call_rate", "eval_env_success"]),
);
