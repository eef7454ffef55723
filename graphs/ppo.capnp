# PPO with a learned critic (GAE advantages) and a KL penalty to a frozen reference model,
# synchronous schedule. The defaults are the arithmetic example's (examples/arith/run.sh makes
# runs/arith/setup and runs/arith/sft_model); for your own model change the paths marked PATH.
#
# Dataflow (each step: batchSize prompts, samplesPerPrompt samples each):
#   data ─▶ rollout ─▶ reward ─▶ reference ─▶ critic.groups ─▶ filter ─┬─▶ trainer.batches
#                                                                      └─▶ critic.train
#   trainer.weights ─▶ publisher ─▶ rollout.weights   (the new policy, version k+1)
#
#   data       JSONL prompts with labels (PATH: data.path; keys as in DataParams).
#   rollout    samples each prompt samplesPerPrompt times with the current policy, recording each
#              token's log-prob and weight version (PATH: rollout.model = the initial policy).
#   reward     math_reward: 1 when the final answer equals the label (swap in remote_reward for an
#              HTTP reward server).
#   reference  frozen copy of the initial policy: sets each sample's ref_logprobs, which the
#              trainer's KL term (klType, klCoef) uses (PATH: reference.model, usually =
#              rollout.model; its temperature must equal the trainer's). Remove this actor and set
#              klCoef = 0 to train without KL.
#   critic     value model = a decoder + value head Linear(hidden, 1) (PATH: critic.model: an HF
#              folder; value_head.safetensors there is loaded, else the head starts at zero, so
#              the first advantages are the plain rewards), the graph's second learner. On
#              "groups" (item by item) it sets each sample's values (one per output token), which
#              the trainer's gae estimator needs; "train" is its batch port: each step the driver
#              trains it, beside the trainer, on the groups of the trainer's batch, one optimizer
#              step of the clipped value loss toward the GAE returns per trainBatch groups. Its
#              weights are checkpointed with the run (model/ + value_head.safetensors + optimizer
#              state).
#   filter     group_filter; with a critic, groups whose rewards all agree still carry signal, so
#              dynamic sampling is off (turn it on to drop them as in GRPO).
#   trainer    the policy learner (the first learner listed: its version is the run's, the one
#              the rollout generates with): estimator = "gae" (gamma, lambda as the critic's),
#              PPO clipped loss, AdamW (PATH: trainer.model = rollout.model; evalData, exportDir).
#   publisher  hands the new weights to the rollout engine (colocated, handover = share: the
#              engine reads the trainer's own weights in this process, nothing is copied).
#
# Run it:   build/milesrt run graphs/ppo.capnp [--set run.steps=5] [--set critic.lr=1e-4]
@0x8c212684a630a051;
using import "/milesrt/graph.capnp".Graph;

const graph :Graph = (
  name = "ppo",
  description = "PPO (critic + GAE, KL to a reference model), synchronous (inputs: runs/arith/setup and runs/arith/sft_model, steps 1 and 2 of examples/arith/run.sh)",
  actors = [
    (name = "data", kind = "data",
     params = (data = (path = "runs/arith/setup/rl.jsonl", epochs = 0, seed = 2))),          # PATH
    (name = "rollout", kind = "rollout",
     params = (rollout = (model = "runs/arith/sft_model", samplesPerPrompt = 8, maxNewTokens = 4,  # PATH
                          temperature = 1.0, kvBlocks = 1024, blockSize = 16, stepTokens = 2048))),
    (name = "reward", kind = "math_reward"),
    (name = "reference", kind = "reference",
     params = (reference = (model = "runs/arith/sft_model", temperature = 1.0))),             # PATH
    (name = "filter", kind = "group_filter", params = (groupFilter = (dynamicSampling = false))),
    (name = "trainer", kind = "trainer",
     params = (trainer = (model = "runs/arith/sft_model", objective = rl, estimator = "gae",  # PATH
                          gamma = 1.0, lambda = 1.0, klType = k3, klCoef = 0.01,
                          lr = 5e-4, gradClip = 1.0, epsClip = 0.2, temperature = 1.0,
                          evalData = "runs/arith/setup/heldout.jsonl", evalInterval = 10,     # PATH
                          evalMaxNewTokens = 4, exportDir = "runs/arith/ppo_model"))),       # PATH
    (name = "critic", kind = "critic",
     params = (critic = (model = "runs/arith/sft_model", lr = 1e-3, gradClip = 1.0,           # PATH
                         valueClip = 0.2, gamma = 1.0, lambda = 1.0, trainBatch = 4))),
    (name = "publisher", kind = "publisher", params = (publisher = (transport = colocated))),
  ],
  edges = [
    (from = "data.prompts", to = "rollout.prompts"),
    (from = "rollout.groups", to = "reward.groups"),
    (from = "reward.scored", to = "reference.groups"),
    (from = "reference.groups", to = "critic.groups"),
    (from = "critic.groups", to = "filter.groups"),
    (from = "filter.groups", to = "trainer.batches"),
    (from = "filter.groups", to = "critic.train"),
    (from = "trainer.weights", to = "publisher.weights"),
    (from = "publisher.updates", to = "rollout.weights"),
  ],
  schedule = (sync = void),
  run = (steps = 100, batchSize = 32, seed = 1, dir = "runs/arith/ppo",                        # PATH
         checkpointInterval = 20, progressMetric = "eval_accuracy",
         plot = ["reward_mean", "accuracy", "eval_accuracy", "critic_loss", "critic_value_mean"]),
);
