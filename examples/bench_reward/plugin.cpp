// The even_token_reward kind as a plugin: the benchmark graphs name libmilesrt_bench_reward.so in
// their `plugins` list, and milesrt registers the kind before it starts the actor system.
#include <caf/actor_system_config.hpp>

#include "actors/lib/llm/messages.hpp"
#include "examples/bench_reward/even_token_reward.hpp"
#include "runtime/core/plugins.hpp"

extern "C" void milesrt_plugin_init(milesrt::runtime::plugin_context* ctx) {
  milesrt::examples::register_even_token_reward(*ctx->kinds);
  ctx->config->add_message_types<caf::id_block::milesrt_llm>();
}
