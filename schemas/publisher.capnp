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
  # verifyWeights: engines compare per-tensor hashes after applying each version.
  fullEvery @4 :UInt32 = 0;
  # disk_delta: a full copy every N versions besides the deltas; 0 = only the first and on request.
  engines @5 :UInt32 = 1;
  # broadcast / p2p: the engine ranks (the rollout's replicas, each on its own GPU); the trainer
  # is rank 0, replica r is rank r + 1.

  enum Transport {
    colocated @0;
    ipc @1;
    broadcast @2;
    p2p @3;
    diskDelta @4;
  }
}
