// The length_reward kind as a plugin: a graph file names libmilesrt_custom_reward.so in its
// `plugins` list, and milesrt registers the kind before it starts the actor system.
#include <caf/actor_system_config.hpp>

#include "actors/lib/llm/messages.hpp"
#include "examples/custom_reward/length_reward.hpp"
#include "runtime/core/plugins.hpp"

extern "C" void milesrt_plugin_init(milesrt::runtime::plugin_context* ctx) {
  milesrt::examples::register_length_reward(*ctx->kinds);
  // The payload (sample_group) is the rollout's; a plugin with payload types of its own would add
  // its block here too: ctx->config->add_message_types<caf::id_block::my_plugin>().
  ctx->config->add_message_types<caf::id_block::milesrt_llm>();
}
