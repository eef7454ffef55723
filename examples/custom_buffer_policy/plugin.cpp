// The freshest buffer policy as a plugin: a graph file names libmilesrt_custom_buffer_policy.so in
// its `plugins` list and `policy = "freshest"` in its trajectory_buffer; milesrt adds the policy to
// the registry the buffer kind reads before the graph is validated.
#include <stdexcept>

#include "actors/buffer/buffer_policy.hpp"
#include "examples/custom_buffer_policy/freshest.hpp"
#include "runtime/core/plugins.hpp"

extern "C" void milesrt_plugin_init(milesrt::runtime::plugin_context* ctx) {
  using namespace milesrt;
  if (ctx->extensions == nullptr)
    throw std::runtime_error("custom_buffer_policy: this program offers no buffer policies");
  auto& policies = ctx->extensions->get<buffer::policy_registry>(buffer::kPolicyExtension);
  if (!policies.contains("freshest")) policies.add("freshest", examples::make_freshest_policy);
}
