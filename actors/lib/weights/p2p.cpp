// The p2p transport: NCCL sends and receives along a transfer plan computed once. Today the
// trainer is one rank owning whole tensors (plan_whole_model); the planner itself splits
// tensor-parallel shards (transfer_plan.cpp). What it shares with broadcast is nccl_transport,
// in nccl_broadcast.cpp.
#include "actors/lib/weights/nccl_broadcast.hpp"

#ifdef MILESRT_HAVE_NCCL

namespace milesrt::weights {

void p2p_transport::exchange(nccl_broadcaster& comm, llm::flat_params& p, int engines, int64_t) {
  if (plan_.empty()) plan_ = plan_whole_model(p.element_counts(), engines);
  comm.run_plan(p, plan_);
}

}  // namespace milesrt::weights

#endif
