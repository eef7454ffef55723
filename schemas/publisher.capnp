# Parameters of the `publisher` actor kind: how the trainer's weights reach the rollout engines.
@0xa7c3e1f2b4d50619;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("milesrt::schema");

struct PublisherParams {
  transport @0 :Transport = colocated;
  dir @1 :Text;
  # disk_delta: the directory deltas are written to ("" = <run dir>/weights).
  bucketMb @2 :UInt32 = 256;
  # broadcast / p2p: bucket size.
  verify @3 :Bool = true;
  # Engines compare per-tensor hashes after applying each version.
  fullCopyInterval @4 :UInt32 = 0;
  # disk_delta: a full copy every N versions besides the deltas; 0 = only the first and on request.
  engines @5 :UInt32 = 1;
  # broadcast / p2p: the engine ranks (the rollout's replicas, each on its own GPU); the trainer
  # is rank 0, replica r is rank r + 1.
  handover @6 :Handover = share;
  # What each version is published from. share: the trainer's own buffer, as it is (colocated:
  # the engine reads it and nothing is copied). Right when training waits until a version is
  # published, as in the sync schedule. copy: an immutable copy of the version, which the
  # trainer's process takes as the trainer announces the version, before the trainer can start
  # its next step (the colocated engine adopts the copy; the other transports read from it). An
  # async schedule needs copy: training overlaps publishing there.
  keepVersions @7 :UInt32 = 4;
  # How many published versions this process keeps (at least 1): with handover = copy, the
  # immutable copies, for engines that have not applied them yet (an async schedule needs more
  # than its maxStaleness); with diskDelta, the copies full copies are written from when an
  # engine cannot apply a delta (in CPU memory, one model each).

  enum Transport {
    colocated @0;
    ipc @1;
    broadcast @2;
    p2p @3;
    diskDelta @4;
  }

  enum Handover {
    share @0;
    copy @1;
  }
}
