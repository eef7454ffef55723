# The toy kinds in a graph: no model, just numbers and versions (the kinds come from a plugin).
#   src (toy_source) -> stage (toy_stage) -> learner (toy_learner) -> stage.weights
@0xd3a1b2c3d4e5f607;
using import "/milesrt/graph.capnp".Graph;

const graph :Graph = (
  name = "toy_sync",
  plugins = ["libmilesrt_toy.so"],
  actors = [
    (name = "src", kind = "toy_source"),
    (name = "stage", kind = "toy_stage", replicas = 2),
    (name = "learner", kind = "toy_learner"),
  ],
  edges = [
    (from = "src.items", to = "stage.items"),
    (from = "stage.items", to = "learner.items"),
    (from = "learner.weights", to = "stage.weights"),
  ],
  schedule = (sync = void),
  run = (steps = 5, batchSize = 4, dir = "runs/toy_sync", progressMetric = "loss",
         deadlineSeconds = 10),
);
