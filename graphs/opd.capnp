# On-policy distillation, synchronous: the student samples, a frozen teacher scores every sampled
# token, and the student minimises the per-token reverse KL to the teacher (trainer.distillCoef).
# No reward: the policy-gradient term is zero (every reward is 0) and the distillation term alone
# trains. The defaults are the arithmetic example's (examples/arith/run.sh opd): the student is the
# SFT model, the teacher the GRPO-trained one; for your own models change the paths marked PATH.
#
# Dataflow (each step: batchSize prompts, samplesPerPrompt samples each):
#   data ─▶ rollout ─▶ teacher.samples ─▶ trainer.batches
#   trainer.weights ─▶ publisher ─▶ rollout.weights   (the new student, version k+1)
#
#   rollout    the student sampling (PATH: rollout.model = the student).
#   teacher    a local teacher (PATH: teacher.model) on its own device, one batched prefill per
#              group; or a remote one: replace `model = ...` by `url = "http://host:port"` (a server
#              of the teacher protocol, e.g. build/milesrt_teacher_server --model <teacher>). It
#              refuses to start unless its tokenizer is the student's (teacher.student = the
#              student's folder), naming the first difference. Its temperature is the trainer's.
#   trainer    distillCoef = 1 with the k1 estimator (per-token reverse KL, as a per-token
#              advantage); distillEstimator = k3 for the lower-variance one. Add a reward actor
#              before the teacher (edge reward.scored -> teacher.groups) for GRPO + distillation,
#              and a reference actor for KL to a reference as well (ref_logprobs, apart from the
#              teacher's teacher_logprobs).
#
# Run it:   build/milesrt run graphs/opd.capnp [--set trainer.distillEstimator=k3]
@0xe0c1a7b35d2f4986;
using import "/milesrt/graph.capnp".Graph;

const graph :Graph = (
  name = "opd",
  description = "On-policy distillation on arithmetic: the SFT student toward the GRPO teacher, no reward (inputs: runs/arith/setup, runs/arith/sft_model and runs/arith/grpo_model, from examples/arith/run.sh sync)",
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
                          evalMaxNewTokens = 4, exportDir = "runs/arith/opd_model"))),        # PATH
    (name = "publisher", kind = "publisher", params = (publisher = (transport = colocated))),
  ],
  edges = [
    (from = "data.prompts", to = "rollout.prompts"),
    (from = "rollout.groups", to = "teacher.samples"),
    (from = "teacher.groups", to = "trainer.batches"),
    (from = "trainer.weights", to = "publisher.weights"),
    (from = "publisher.updates", to = "rollout.weights"),
  ],
  schedule = (sync = void),
  run = (steps = 100, batchSize = 32, seed = 1, dir = "runs/arith/opd",                         # PATH
         progressMetric = "eval_accuracy",
         plot = ["distill_kl_mean", "distill_logprob_gap", "eval_accuracy", "entropy"]),
);
