# On-policy distillation, asynchronous: graphs/opd.capnp with `schedule = (async = (maxStaleness =
# 1))`. Generation and the teacher's scoring run up to one version ahead of training: while the
# trainer trains on step k's groups, the rollout samples step k+1's under version k and the teacher
# (a stage with its own thread) scores them, so neither waits for the other. The publisher hands
# the engine an immutable copy of each version (handover = copy), as in grpo_async.capnp. Every
# other actor, edge and path is opd.capnp's (see there; PATH marks what to change).
#
# Run it:   build/milesrt run graphs/opd_async.capnp
@0xea9ef9311789b94d;
using import "/milesrt/graph.capnp".Graph;

const graph :Graph = (
  name = "opd_async",
  description = "On-policy distillation on arithmetic, asynchronous: the SFT student toward the GRPO teacher, no reward (inputs: runs/arith/setup, runs/arith/sft_model and runs/arith/grpo_model, from examples/arith/run.sh sync)",
  actors = [
    (name = "data", kind = "data",
     params = (data = (path = "runs/arith/setup/rl.jsonl", epochs = 0, seed = 2))),           # PATH
    (name = "rollout", kind = "rollout",
     params = (rollout = (model = "runs/arith/sft_model", samplesPerPrompt = 8, maxNewTokens = 4,  # PATH
                          temperature = 1.0, kvBlocks = 1024, blockSize = 16, stepTokens = 2048))),
    (name = "teacher", kind = "teacher",
     params = (teacher = (model = "runs/arith/grpo_model", student = "runs/arith/sft_model",  # PATH
                          temperature = 1.0))),
    (name = "trainer", kind = "trainer",
     params = (trainer = (model = "runs/arith/sft_model", objective = rl, estimator = "grpo",  # PATH
                          distillCoef = 1.0, distillEstimator = k1,
                          lr = 1e-3, lrSchedule = cosine, minLr = 5e-5, gradClip = 1.0,
                          evalData = "runs/arith/setup/heldout.jsonl", evalInterval = 10,      # PATH
                          evalMaxNewTokens = 4, exportDir = "runs/arith/opd_async_model"))),  # PATH
    (name = "publisher", kind = "publisher",
     params = (publisher = (transport = colocated, handover = copy, keepVersions = 4))),
  ],
  edges = [
    (from = "data.prompts", to = "rollout.prompts"),
    (from = "rollout.groups", to = "teacher.samples"),
    (from = "teacher.groups", to = "trainer.batches"),
    (from = "trainer.weights", to = "publisher.weights"),
    (from = "publisher.updates", to = "rollout.weights"),
  ],
  schedule = (async = (maxStaleness = 1)),
  run = (steps = 100, batchSize = 32, seed = 1, dir = "runs/arith/opd_async",                   # PATH
         progressMetric = "eval_accuracy",
         plot = ["distill_kl_mean", "distill_logprob_gap", "eval_accuracy", "entropy"]),
);
