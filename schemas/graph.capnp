# The graph file format of milesrt.
#
# A graph file imports this schema and declares one constant:
#
#   using import "/milesrt/graph.capnp".Graph;
#   const graph :Graph = ( name = "...", actors = [...], edges = [...], schedule = (...), run = (...) );
#
# milesrt reads graph files at run time with capnp::SchemaParser, so users never compile them.
@0x9aea7deb091a89fe;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("milesrt::schema");

struct Graph {
  name @0 :Text;
  description @1 :Text;
  plugins @2 :List(Text);
  # Shared libraries (paths relative to the graph file) that register custom actor kinds.
  actors @3 :List(ActorSpec);
  edges @4 :List(Edge);
  schedule @5 :Schedule;
  run @6 :Run;
}

struct ActorSpec {
  name @0 :Text;
  # Unique within the graph: edges, --set overrides, metrics and errors use it.
  kind @1 :Text;
  # A registered actor kind: built in, or from a plugin.
  replicas @2 :UInt32 = 1;
  placement @3 :Text;
  # Which process hosts the actor: "" (the driver's own) or the name a worker joined with.
  params @4 :import "/milesrt/kinds.capnp".Params;
  # The kind's parameters: `(none = void)` (the default: the kind's defaults), `(custom = [...])`
  # (named typed values, checked against the parameter list the kind declares), or the member of
  # the kind's own params struct, `(<member> = (...))`. The members are not named here: the app
  # registers the schema of its kinds as /milesrt/kinds.capnp in the schema import folder.
  deadlineSeconds @5 :Float64 = 0;
  # Deadline of each request to this actor; 0 = the run's deadlineSeconds.
  weight @6 :Float64 = 0;
  # For a source, its share of the admitted items when a graph has several sources (datasets mixed
  # by weight): each admission is shared out in proportion to the weights, by a smooth weighted
  # round robin (exact over every sum of weights' items, kept in checkpoints). 0 = 1. Only sources
  # take a weight. A source that runs out leaves the mix; the run ends when all have run out.
}

struct Edge {
  from @0 :Text;
  # "actor.port": an output port.
  to @1 :Text;
  # "actor.port": an input port.
  capacity @2 :UInt32 = 0;
  # The most work items the edge holds at once, queued or in flight; for an edge into the learner,
  # the learner's buffer (at least run.batchSize). A full edge holds work upstream, never drops it:
  # the source is asked for no more than the room left, a stage is sent no new item while an edge
  # it feeds is full. 0 = the schedule's window, the most items the schedule itself keeps open:
  # run.batchSize in sync, (maxStaleness + 1) x batchSize in async. Publications are not counted.
}

struct Schedule {
  union {
    sync @0 :Void;
    # Lockstep: step k generates under weight version k, trains, publishes k+1.
    async @1 :Async;
    # Bounded staleness: generation runs ahead of training by at most maxStaleness versions.
  }

  struct Async {
    maxStaleness @0 :UInt32 = 1;
    onStale @1 :OnStale = wait;
    # What becomes of work past maxStaleness (a trajectory buffer's onStale names the same choice
    # for the groups it holds).
  }

  enum OnStale {
    wait @0;
    # Admit new work only while the bound can still be kept.
    drop @1;
    # Discard (and count) what arrives over the bound.
  }
}

struct Run {
  steps @0 :UInt32 = 1;
  seed @1 :UInt64 = 0;
  dir @2 :Text = "runs/latest";
  # The run directory: metrics.jsonl and checkpoints/ go here.
  checkpointInterval @3 :UInt32 = 0;
  # Steps between checkpoints; 0 = none.
  progressMetric @4 :Text;
  # The metric shown on the live progress line.
  batchSize @5 :UInt32 = 1;
  # Items the learner consumes per step (and the unit of the async admission rule).
  deadlineSeconds @6 :Float64 = 600;
  # Deadline of every request between actors, unless the actor sets its own.
  workerWaitSeconds @7 :Float64 = 60;
  # How long the run waits for the worker processes its placements name.
  plot @8 :List(Text);
  # Metrics drawn (one panel each, against the step) into plot.svg beside metrics.jsonl when the
  # run ends.
  sinks @9 :List(Sink);
  # The metric sinks that run besides metrics.jsonl (always written): `--set run.sinks=a,b`.
  chart @10 :List(Text);
  # Metrics the live page charts (one chart each); empty: those of `plot` and `progressMetric`.
  metricsPort @11 :UInt16 = 0;
  # Loopback port of the HTTP server of the `prometheus` and `page` sinks; 0 = a free one.
  workerGraceSeconds @12 :Float64 = 30;
  # How long the run waits for a worker process that went away (killed, crashed, its host lost)
  # to be replaced: a worker that joins under the same name gets the same actors (their kinds must
  # be restartable); past it, the run fails naming the worker, its actors and what was in flight.
  maxRestarts @13 :UInt32 = 10;
  # The most restarts of one replica of a restartable kind within restartWindowSeconds; one more
  # death ends the run naming the actor and its cause. 0: a dead replica is never restarted.
  restartWindowSeconds @14 :Float64 = 600;
  # The window over which maxRestarts counts.
  maxStartupFailures @15 :UInt32 = 3;
  # A replica that dies this many times in a row before answering anything (a failure at
  # start-up, which a restart repeats) ends the run naming the actor and its cause.
  maxOverSampling @16 :UInt32 = 8;
  # Items that stages may drop (a filter answering nothing) between two steps, as a multiple of
  # batchSize: past maxOverSampling x batchSize dropped since the last step, the run ends naming
  # the actors that dropped and the counts, instead of admitting new work forever. 0: no bound.

  enum Sink {
    tensorboard @0;
    # TensorBoard event files in RUN_DIR/tensorboard/: scalars per step, histograms of lists.
    prometheus @1;
    # GET /metrics in Prometheus' text exposition format (127.0.0.1:metricsPort).
    page @2;
    # The live page at http://127.0.0.1:metricsPort/ (the graph, its actors' states, charts).
  }
}
