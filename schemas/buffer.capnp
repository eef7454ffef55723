# Parameters of the `trajectory_buffer` actor kind: `params = (trajectoryBuffer = (...))`.
@0xd2a6c41f0b7e3959;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("milesrt::schema");

struct TrajectoryBufferParams {
  policy @0 :Text = "fifo";
  # Which held groups make each batch: "fifo" (arrival order), "staleness" (past maxStaleness:
  # dropped or kept waiting, as onStale says; the oldest fresh version first), "priority" (the
  # largest reward spread first, under the same staleness rule), or a policy a plugin registered.
  maxStaleness @1 :UInt32 = 1;
  # Versions a served group may lag the learner (its oldest token's version). The staleness and
  # priority policies act on it; every policy counts the groups it serves past it
  # (buffer_stale_served).
  onStale @2 :OnStale = drop;
  # What becomes of a group past maxStaleness (the async schedule's onStale names the same choice
  # for the driver's admission).

  enum OnStale {
    wait @0;
    # It stays, behind every fresher group, and is served only when a batch cannot be filled
    # without it (counted when served).
    drop @1;
    # A group past maxStaleness is discarded, when it arrives or while it waits (counted).
  }
}
