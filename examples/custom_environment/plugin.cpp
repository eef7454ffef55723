// The guess_number environment as a plugin: a graph file names libmilesrt_custom_environment.so
// in its `plugins` list and `environment = "guess_number"` in its environment actor; milesrt
// adds the environment to the registry the environment kind reads before the graph is validated.
#include <stdexcept>

#include "actors/environment/environment.hpp"
#include "examples/custom_environment/guess_number.hpp"
#include "runtime/core/plugins.hpp"

extern "C" void milesrt_plugin_init(milesrt::runtime::plugin_context* ctx) {
  using namespace milesrt;
  if (ctx->extensions == nullptr)
    throw std::runtime_error("custom_environment: this program offers no environments");
  auto& envs =
      ctx->extensions->get<environment::environment_registry>(environment::kEnvironmentExtension);
  if (!envs.contains("guess_number")) envs.add("guess_number", examples::make_guess_number);
}
