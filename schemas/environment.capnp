# Parameters of the `environment` actor kind: whole multi-turn episodes run inside the graph
# (docs/environments.md). Each task (a prompt from the data source) becomes `samplesPerPrompt`
# episodes
# against the rollout its `generate` port is joined to; the finished episodes go down the graph as
# one sample group, with per-token masks (the model's tokens trained, the environment's not).
@0xecf31a039475763f;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("milesrt::schema");

struct EnvironmentParams {
  environment @0 :Text = "calculator";
  # The environment's name: a built-in (calculator, remote) or one a plugin added.
  options @1 :Text = "{}";
  # The environment's own options, a JSON object (calculator: {"tool": true}; remote:
  # {"url": "http://127.0.0.1:8000", "timeoutSeconds": 10}).
  model @2 :Text;
  # The model folder whose tokenizer.json and chat template render the episodes: the rollout's.
  chatTemplate @3 :Text;
  # A .jinja file; empty: the model's own template.
  samplesPerPrompt @4 :UInt32 = 8;
  # Episodes per task: one GRPO group (as the rollout's samplesPerPrompt).
  maxTurns @5 :UInt32 = 4;
  # The model's turns per episode; an episode that reaches it without being done ends ("turns").
  maxTokens @6 :UInt32 = 512;
  # An episode's tokens (prompt, replies and observations); past it the episode ends ("tokens").
  maxSeconds @7 :Float64 = 60;
  # An episode's wall-clock time; past it the episode ends ("time").
  maxNewTokens @8 :UInt32 = 64;
  # The most tokens one turn may sample.
  temperature @9 :Float64 = 1.0;
  topP @10 :Float64 = 1.0;
  generateDeadlineSeconds @11 :Float64 = 600;
  # The deadline of each request to the generation service.
  evalData @12 :Text;
  # Held-out tasks (JSONL: prompt or messages, label); empty: no evaluation.
  evalInterval @13 :UInt32 = 0;
  # Versions between evaluations, as the trainer's evalInterval counts steps: evaluate when the
  # first turn under version 0, evalInterval, 2 evalInterval, ... is sampled; 0: only under
  # version 0.
  evalTemperature @14 :Float64 = 0.00001;
  # The evaluation's sampling temperature (the smallest the rollout takes: greedy).
  evalOptions @15 :Text;
  # A second evaluation beside the first with these options (the calculator's {"tool": false}:
  # the same tasks without the tool); empty: none.
}
