# The whole GRPO loop as a benchmark, asynchronous: bench_rl_sync.capnp's actors and sizes, with
# generation up to one version ahead of training (maxStaleness = 1), so the engine samples the
# next step's groups while the trainer trains on one GPU. Both hold memory at once: the engine's
# KV pool is a smaller share (kvMemoryFraction = 0.25) and is not released between steps; the
# publisher hands each version over as a copy (handover = copy, as async needs; keepVersions = 2,
# the version the engine samples with and the next, not more bf16 copies) without per-tensor
# hashes (verify = false: hashing a version on the host CPU takes seconds, longer than the step's
# publishing, and a copy within one process has no transport to check), and the trainer corrects
# the one version of staleness with truncated importance sampling.
@0xa6ab60b7f42a8be1;
using import "/milesrt/graph.capnp".Graph;

const graph :Graph = (
  name = "bench_rl_async",
  description = "the GRPO loop timed on one GPU, bounded-staleness asynchronous (inputs: runs/bench_rl/prompts.jsonl from test/peers/hf_rl_loop.py --make-prompts, runs/bench_rl/model from test/peers/hf_generate.py --make-model runs/bench_rl/model --shape qwen3-0.6b)",
  plugins = ["libmilesrt_bench_reward.so"],
  actors = [
    (name = "data", kind = "data",
     params = (data = (path = "runs/bench_rl/prompts.jsonl", epochs = 0, seed = 2))),
    (name = "rollout", kind = "rollout",
     params = (rollout = (model = "runs/bench_rl/model", device = cuda, dtype = bf16,
                          samplesPerPrompt = 8, maxNewTokens = 1024, temperature = 1.0,
                          stepTokens = 8192, kvMemoryFraction = 0.25))),
    (name = "reward", kind = "even_token_reward"),
    (name = "filter", kind = "group_filter"),
    (name = "trainer", kind = "trainer",
     params = (trainer = (model = "runs/bench_rl/model", device = cuda, dtype = bf16,
                          objective = rl, estimator = "grpo", lr = 1e-6, gradClip = 1.0,
                          epsClip = 0.2, tis = true))),
    (name = "publisher", kind = "publisher",
     params = (publisher = (transport = colocated, handover = copy, keepVersions = 2,
                              verify = false))),
  ],
  edges = [
    (from = "data.prompts", to = "rollout.prompts"),
    (from = "rollout.groups", to = "reward.groups"),
    (from = "reward.scored", to = "filter.groups"),
    (from = "filter.groups", to = "trainer.batches"),
    (from = "trainer.weights", to = "publisher.weights"),
    (from = "publisher.updates", to = "rollout.weights"),
  ],
  schedule = (async = (maxStaleness = 1)),
  run = (steps = 4, batchSize = 32, seed = 1, dir = "runs/bench_rl/async",
         progressMetric = "reward_mean"),
);
