// The vanilla_pg policy loss as a plugin: a graph file names libmilesrt_custom_loss.so in its
// `plugins` list and `policyLoss = "vanilla_pg"` in its trainer; milesrt adds the loss to the
// registries the trainer reads before the graph is validated.
#include "actors/lib/rl/builtin.hpp"
#include "examples/custom_loss/vanilla_pg.hpp"
#include "runtime/core/plugins.hpp"

extern "C" void milesrt_plugin_init(milesrt::runtime::plugin_context* ctx) {
  using namespace milesrt;
  if (ctx->extensions == nullptr)
    throw std::runtime_error("custom_loss: this program offers no RL registries");
  auto& rl_registries = ctx->extensions->get<rl::registries>(rl::kRegistriesExtension);
  if (!rl_registries.policy_losses.contains("vanilla_pg")) {
    rl_registries.policy_losses.add("vanilla_pg", [] { return examples::make_vanilla_pg(); });
  }
}
