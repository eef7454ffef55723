# The whole GRPO loop as a benchmark (docs/benchmarks.md, .ci/gpu-rl): the rollout engine and the
# trainer colocated on one GPU in bf16, synchronous schedule. Each step: 32 prompts of token ids
# (runs/bench_rl/prompts.jsonl, written by `test/peers/hf_rl_loop.py --make-prompts`) x 8 samples
# of up to 1,024 tokens at temperature 1, the even_token_reward plugin (the share of even token
# ids: it varies within every group, so the filter keeps them all and every step trains on 256
# samples), a GRPO step, and the colocated publisher (handover = share). The model is
# runs/bench_rl/model (random weights: `test/peers/hf_generate.py --make-model DIR --shape
# qwen3-0.6b`); point both models at another folder with `--set rollout.model=DIR --set
# trainer.model=DIR`. Per step, metrics.jsonl has the phases' wall times (active_seconds), the
# time no actor worked (idle_seconds) and the tokens trained (train_tokens);
# `test/peers/rl_summary.py RUN_DIR` prints their medians.
@0xc39aa9ff8319be03;
using import "/milesrt/graph.capnp".Graph;

const graph :Graph = (
  name = "bench_rl_sync",
  description = "the GRPO loop timed on one GPU, synchronous (inputs: runs/bench_rl/prompts.jsonl from test/peers/hf_rl_loop.py --make-prompts, runs/bench_rl/model from test/peers/hf_generate.py --make-model runs/bench_rl/model --shape qwen3-0.6b)",
  plugins = ["libmilesrt_bench_reward.so"],
  actors = [
    (name = "data", kind = "data",
     params = (data = (path = "runs/bench_rl/prompts.jsonl", epochs = 0, seed = 2))),
    (name = "rollout", kind = "rollout",
     params = (rollout = (model = "runs/bench_rl/model", device = cuda, dtype = bf16,
                          samplesPerPrompt = 8, maxNewTokens = 1024, temperature = 1.0,
                          stepTokens = 8192, kvMemoryFraction = 0.5, releaseKvWhenIdle = true))),
    (name = "reward", kind = "even_token_reward"),
    (name = "filter", kind = "group_filter"),
    (name = "trainer", kind = "trainer",
     params = (trainer = (model = "runs/bench_rl/model", device = cuda, dtype = bf16,
                          objective = rl, estimator = "grpo", lr = 1e-6, gradClip = 1.0,
                          epsClip = 0.2))),
    (name = "publisher", kind = "publisher", params = (publisher = (transport = colocated))),
  ],
  edges = [
    (from = "data.prompts", to = "rollout.prompts"),
    (from = "rollout.groups", to = "reward.groups"),
    (from = "reward.scored", to = "filter.groups"),
    (from = "filter.groups", to = "trainer.batches"),
    (from = "trainer.weights", to = "publisher.weights"),
    (from = "publisher.updates", to = "rollout.weights"),
  ],
  schedule = (sync = void),
  run = (steps = 4, batchSize = 32, seed = 1, dir = "runs/bench_rl/sync",
         progressMetric = "reward_mean"),
);
