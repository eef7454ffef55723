# Stage 1 of the arithmetic example: supervised warm start on the sloppy teacher's demonstrations,
# until held-out accuracy stops improving (no gain over evalPatience = 2 evaluations, counted from
# step evalMinSteps = 400 on); the best model is exported for stage 2. The model learns to add
# suddenly, somewhere between steps 125 and 375 depending on the seed (docs/benchmarks.md): the plateau
# is looked for only after that.
@0xe1f2a3b4c5d6e7f8;
using import "/milesrt/graph.capnp".Graph;

const graph :Graph = (
  name = "sft",
  description = "SFT warm start of the arithmetic model (inputs: runs/arith/setup, step 1 of examples/arith/run.sh)",
  actors = [
    (name = "data", kind = "data",
     params = (data = (path = "runs/arith/setup/sft.jsonl", epochs = 0, seed = 1))),
    (name = "trainer", kind = "trainer",
     params = (trainer = (model = "runs/arith/setup/model", objective = sft,
                          lr = 5e-3, gradClip = 1.0, warmupSteps = 50,
                          evalData = "runs/arith/setup/heldout.jsonl", evalInterval = 25,
                          evalMaxNewTokens = 4, evalPatience = 2, evalMinSteps = 400,
                          exportDir = "runs/arith/sft_model"))),
  ],
  edges = [
    (from = "data.prompts", to = "trainer.sft"),
  ],
  schedule = (sync = void),
  run = (steps = 800, batchSize = 64, seed = 1, dir = "runs/arith/sft",
         progressMetric = "eval_accuracy", plot = ["sft_loss", "eval_accuracy"]),
);
