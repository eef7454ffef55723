#pragma once
/// The GPU backend: NCCL's own collectives (the library the CUDA build of libtorch links, and that
/// the broadcast publisher already uses), over the CUDA tensors of one device per rank. The ranks
/// meet through the same c10d TCP store as Gloo's (rendezvous()); rank 0 makes NCCL's unique id
/// and hands it to the others through the store.
///
/// Each collective is enqueued on the device's current stream and waited for: a watchdog polls
/// the stream and NCCL's asynchronous error, and a peer that died or a collective that outlives
/// group_options::op_timeout aborts the communicator and throws collective_failed naming the rank.

#include <caf/expected.hpp>
#include <memory>

#include "actors/lib/dist/collectives.hpp"

namespace milesrt::dist {

/// Whether this build has the NCCL backend (CUDA and NCCL found at build time).
bool nccl_available();

/// Meets the other ranks and forms an NCCL group on CUDA device `device`. Fails with an error
/// naming the missing ranks, an unreachable rank 0, a port in use, or NCCL's reason.
caf::expected<std::unique_ptr<collectives>> make_nccl_collectives(const group_options& o,
                                                                  int device);

}  // namespace milesrt::dist
