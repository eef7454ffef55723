// The toy kinds as a plugin: a graph file names this library in its `plugins` list, and milesrt
// registers the kinds before it starts the actor system.
#include "runtime/core/plugins.hpp"
#include "runtime/testing/toy_kinds.hpp"

extern "C" void milesrt_plugin_init(milesrt::runtime::plugin_context* ctx) {
  milesrt::toy::register_kinds(*ctx->kinds);
  // The toy payloads are plain integers, which CAF already knows; a plugin with payload types of
  // its own registers them here: ctx->config->add_message_types<caf::id_block::my_plugin>().
}
