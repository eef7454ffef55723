#include "actors/lib/dist/collectives.hpp"

#include "actors/lib/dist/gloo_collectives.hpp"
#include "actors/lib/dist/nccl_collectives.hpp"

namespace milesrt::dist {

caf::expected<std::unique_ptr<collectives>> make_collectives(const group_options& o,
                                                             const at::Device& device) {
  if (device.is_cuda()) return make_nccl_collectives(o, device.has_index() ? device.index() : 0);
  return make_gloo_collectives(o);
}

}  // namespace milesrt::dist
