# Agentic RL through an OpenAI-compatible session server (docs/sessions.md): agent harnesses open
# sessions over HTTP, run multi-turn, tool-using conversations whose tokens the server keeps
# exactly, and end them with a reward; each ended group of sessions is a GRPO group the trainer
# learns from, its loss over the tokens the model sampled only (a tool's answer is context).
#   server (session_server) --generate--> rollout (the engine samples every turn)
#   server.groups -> trainer.batches -> publisher -> rollout.weights
# runs/agent_calc/setup/model is the calculator agent's small model with its chat template
# (examples/agent_calc/run.sh step 1: milesrt_agent_calc_make; set your own with
# --set server.model=DIR --set rollout.model=DIR --set trainer.model=DIR).
@0xa6c1e0f3b2d49857;
using import "/milesrt/graph.capnp".Graph;

const graph :Graph = (
  name = "agent_sessions",
  description = "GRPO on agent sessions served over HTTP (OpenAI chat completions) (inputs: runs/agent_calc/setup/model, step 1 of examples/agent_calc/run.sh)",
  actors = [
    # The sessions' server: http://127.0.0.1:PORT (the URL is written to RUN_DIR/server.json).
    # Its produce waits for ended groups, so its deadline is long.
    (name = "server", kind = "session_server", deadlineSeconds = 86400,
     params = (sessionServer = (model = "runs/agent_calc/setup/model", port = 0, maxNewTokens = 256,
                                idleTimeoutSeconds = 600, groupTimeoutSeconds = 300))),
    (name = "rollout", kind = "rollout",
     params = (rollout = (model = "runs/agent_calc/setup/model", samplesPerPrompt = 1, maxNewTokens = 256,
                          kvBlocks = 1024, blockSize = 16, stepTokens = 2048))),
    (name = "trainer", kind = "trainer",
     params = (trainer = (model = "runs/agent_calc/setup/model", objective = rl, estimator = "grpo",
                          lr = 1e-5, gradClip = 1.0, epsClip = 0.2))),
    (name = "publisher", kind = "publisher", params = (publisher = (transport = colocated))),
  ],
  edges = [
    (from = "server.groups", to = "trainer.batches"),
    # A service edge: the server's turns are sampled by the rollout's engine, under its weights.
    (from = "server.generate", to = "rollout.generate"),
    (from = "trainer.weights", to = "publisher.weights"),
    (from = "publisher.updates", to = "rollout.weights"),
  ],
  schedule = (sync = void),
  run = (steps = 100, batchSize = 4, dir = "runs/agent_sessions", deadlineSeconds = 3600),
);
