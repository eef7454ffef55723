# GRPO with the plugin's `guess_number` environment: each task's label is the number to find, the
# model guesses, the environment answers "higher" or "lower" until it is found (at most maxTurns
# guesses). On the calculator-agent example's tasks ("37*86", label 3182) that is multiplication
# with feedback. Run it after examples/agent_calc/run.sh made the SFT model:
#   build/milesrt run examples/custom_environment/grpo_guess.capnp
@0xbedf22e9f4c9b6a0;
using import "/milesrt/graph.capnp".Graph;

const graph :Graph = (
  name = "grpo_guess",
  description = "GRPO on a multi-turn environment from a plugin (guess_number) (inputs: runs/agent_calc/setup and runs/agent_calc/sft_model, steps 1 and 2 of examples/agent_calc/run.sh)",
  plugins = ["libmilesrt_custom_environment.so"],
  actors = [
    (name = "data", kind = "data",
     params = (data = (path = "runs/agent_calc/setup/rl.jsonl", epochs = 0, seed = 2))),
    (name = "env", kind = "environment",
     params = (environment = (environment = "guess_number", options = "{\"penalty\": 0.05}",
                              model = "runs/agent_calc/sft_model", samplesPerPrompt = 4,
                              maxTurns = 3, maxTokens = 64, maxNewTokens = 8))),
    (name = "rollout", kind = "rollout",
     params = (rollout = (model = "runs/agent_calc/sft_model", maxNewTokens = 8))),
    (name = "trainer", kind = "trainer",
     params = (trainer = (model = "runs/agent_calc/sft_model", objective = rl, estimator = "grpo",
                          lr = 1e-3))),
    (name = "publisher", kind = "publisher", params = (publisher = (transport = colocated))),
  ],
  edges = [
    (from = "data.prompts", to = "env.prompts"),
    (from = "env.groups", to = "trainer.batches"),
    (from = "env.generate", to = "rollout.generate"),
    (from = "trainer.weights", to = "publisher.weights"),
    (from = "publisher.updates", to = "rollout.weights"),
  ],
  schedule = (sync = void),
  run = (steps = 10, batchSize = 8, seed = 1, dir = "runs/agent_calc/grpo_guess"),
);
