# Stage 1 of the calculator-agent example: supervised warm start on the teacher's turns (a call
# of the calculator in 30% of the episodes that offer it, answers from memory otherwise; and, for
# every task, the turn that reads a calculator's result). Each line is one assistant turn after
# the conversation before it, so only the model's turns are trained on. The last model is
# exported for stage 2 (graphs/agent_env.capnp).
@0xa8eab41fd585e670;
using import "/milesrt/graph.capnp".Graph;

const graph :Graph = (
  name = "agent_calc_sft",
  description = "SFT warm start of the calculator agent (inputs: runs/agent_calc/setup, step 1 of examples/agent_calc/run.sh)",
  actors = [
    (name = "data", kind = "data",
     params = (data = (path = "runs/agent_calc/setup/sft.jsonl", epochs = 0, seed = 1))),
    (name = "trainer", kind = "trainer",
     params = (trainer = (model = "runs/agent_calc/setup/model", objective = sft,
                          lr = 5e-3, gradClip = 1.0, warmupSteps = 30,
                          exportDir = "runs/agent_calc/sft_model"))),
  ],
  edges = [
    (from = "data.prompts", to = "trainer.sft"),
  ],
  schedule = (sync = void),
  run = (steps = 300, batchSize = 64, seed = 1, dir = "runs/agent_calc/sft", plot = ["sft_loss"]),
);
