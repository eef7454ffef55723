# Example (b) of docs/sessions.md: an external agent loop (agent.py, the `openai` package) drives
# sessions through the session server while milesrt trains on them. The agent asks arithmetic
# questions with a calculator tool and ends each session without a reward: the graph's
# math_reward actor scores the session's last turn against the label the agent gave when it
# opened the session (metadata.label), so the reward lives in the graph, not in the harness.
#   agent.py --HTTP--> server (session_server) --generate--> rollout
#   server.unscored -> reward (math_reward) -> trainer.batches -> publisher -> rollout.weights
#   server.groups   -> trainer.batches   (sessions the agent ended with a reward of its own)
# Run:  milesrt run examples/agent_loop/agent_loop.capnp --set server.model=DIR \
#         --set rollout.model=DIR --set trainer.model=DIR &
#       python3 examples/agent_loop/agent.py runs/agent_loop/server.json
@0xc4e1f0a2b3d49861;
using import "/milesrt/graph.capnp".Graph;

const graph :Graph = (
  name = "agent_loop",
  description = "GRPO on an external agent's tool-using sessions, scored by the graph's reward (inputs: runs/agent_calc/setup/model, step 1 of examples/agent_calc/run.sh)",
  actors = [
    (name = "server", kind = "session_server", deadlineSeconds = 86400,
     params = (sessionServer = (model = "runs/agent_calc/setup/model", maxNewTokens = 64,
                                scoreUnrewarded = true, groupTimeoutSeconds = 300))),
    (name = "rollout", kind = "rollout",
     params = (rollout = (model = "runs/agent_calc/setup/model", maxNewTokens = 64, kvBlocks = 1024))),
    (name = "reward", kind = "math_reward"),
    (name = "trainer", kind = "trainer",
     params = (trainer = (model = "runs/agent_calc/setup/model", objective = rl, estimator = "grpo",
                          lr = 1e-5, gradClip = 1.0, epsClip = 0.2))),
    (name = "publisher", kind = "publisher", params = (publisher = (transport = colocated))),
  ],
  edges = [
    (from = "server.unscored", to = "reward.groups"),
    (from = "reward.scored", to = "trainer.batches"),
    (from = "server.groups", to = "trainer.batches"),
    (from = "server.generate", to = "rollout.generate"),
    (from = "trainer.weights", to = "publisher.weights"),
    (from = "publisher.updates", to = "rollout.weights"),
  ],
  schedule = (sync = void),
  run = (steps = 4, batchSize = 2, dir = "runs/agent_loop", deadlineSeconds = 3600),
);
