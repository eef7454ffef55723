// The freshest policy on hand-made groups (the newest version first, the stale ones discarded), and
// the plugin loaded as milesrt loads it.
#include "examples/custom_buffer_policy/freshest.hpp"

#include <gtest/gtest.h>

#include <caf/actor_system_config.hpp>

#include "runtime/core/extensions.hpp"
#include "runtime/core/plugins.hpp"

namespace milesrt::examples {
namespace {

buffer::held_group group(uint64_t version, uint64_t arrival) {
  buffer::held_group g;
  g.item.min_version = g.item.max_version = version;
  g.arrival = arrival;
  return g;
}

TEST(Freshest, ServesTheNewestVersionFirstAndDiscardsTheStale) {
  auto p = make_freshest_policy();
  std::deque<buffer::held_group> held = {group(3, 0), group(5, 1), group(4, 2), group(5, 3),
                                         group(1, 4)};
  buffer::policy_rules rules{1, false};  // onStale = wait: freshest discards anyway
  auto c = p->choose(held, 2, 5, rules);
  EXPECT_EQ(c.serve, (std::vector<size_t>{3, 1}));  // version 5, the newer arrival first
  EXPECT_EQ(c.drop, (std::vector<size_t>{0, 4}));   // versions 3 and 1 lag by more than 1
  EXPECT_EQ(c.stale_served, 0u);
  auto short_of = p->choose(held, 4, 5, rules);
  EXPECT_EQ(short_of.serve.size(), 3u);  // three fresh: too few for 4, the buffer serves none
  EXPECT_FALSE(p->admit(group(2, 9), 5, rules));
  EXPECT_TRUE(p->admit(group(4, 9), 5, rules));
}

TEST(Freshest, ThePluginAddsThePolicyToTheOfferedRegistry) {
  buffer::policy_registry policies = buffer::builtin_policies();
  ASSERT_FALSE(policies.contains("freshest"));
  runtime::extension_points extensions;
  extensions.offer(buffer::kPolicyExtension, &policies);
  runtime::kind_registry kinds;
  caf::actor_system_config config;
  EXPECT_EQ(runtime::load_plugin_file(MILESRT_CUSTOM_BUFFER_POLICY_PLUGIN,
                                      {&kinds, &config, &extensions}),
            "");
  EXPECT_TRUE(policies.contains("freshest"));
  const auto error =
      runtime::load_plugin_file(MILESRT_CUSTOM_BUFFER_POLICY_PLUGIN, {&kinds, &config, nullptr});
  EXPECT_NE(error.find("offers no buffer policies"), std::string::npos) << error;
}

}  // namespace
}  // namespace milesrt::examples
