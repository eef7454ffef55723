// The broadcast transport: NCCL broadcast of the flat buffer from the trainer (rank 0) to every
// engine rank, in buckets of whole tensors (publisher.bucketMb). What it shares with p2p (the
// NCCL id in the update, joining, the location) is nccl_transport, in nccl_broadcast.cpp.
#include "actors/lib/weights/nccl_broadcast.hpp"

#ifdef MILESRT_HAVE_NCCL

namespace milesrt::weights {

void broadcast_transport::exchange(nccl_broadcaster& comm, llm::flat_params& p, int,
                                   int64_t bucket_bytes) {
  comm.broadcast(p, 0, bucket_bytes);
}

}  // namespace milesrt::weights

#endif
