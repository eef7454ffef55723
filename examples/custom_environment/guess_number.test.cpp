// The guess_number environment: an episode played to the end (hints, penalty, reward), a label
// that is no number, bad options; and the plugin loaded as milesrt loads it, adding the
// environment to the registry it is offered.
#include "examples/custom_environment/guess_number.hpp"

#include <gtest/gtest.h>

#include <caf/actor_system_config.hpp>

#include "runtime/core/extensions.hpp"
#include "runtime/core/kind.hpp"
#include "runtime/core/plugins.hpp"

namespace milesrt::examples {
namespace {
using environment::json;

json say(const std::string& text) { return {{"role", "assistant"}, {"content", text}}; }

TEST(GuessNumber, HintsUntilTheGuessIsRight) {
  auto env = make_guess_number();
  ASSERT_EQ(env->configure({{"penalty", 0.1}}), "");
  environment::task t;
  t.prompt = "Guess a number from 1 to 100.";
  t.label = "42";
  auto ep = env->open(t, "e");
  EXPECT_EQ(ep->reset().messages[0]["content"], "Guess a number from 1 to 100.");
  auto o = ep->step(say("50"));
  EXPECT_FALSE(o.done);
  EXPECT_DOUBLE_EQ(o.reward, -0.1);
  EXPECT_EQ(o.messages[0]["content"], "lower");
  o = ep->step(say("I think 30"));
  EXPECT_EQ(o.messages[0]["content"], "higher");
  o = ep->step(say("hmm"));
  EXPECT_EQ(o.messages[0]["content"], "a number, please");
  o = ep->step(say("42"));
  EXPECT_TRUE(o.done);
  EXPECT_DOUBLE_EQ(o.reward, 1.0);
}

TEST(GuessNumber, BadLabelsAndOptions) {
  auto env = make_guess_number();
  EXPECT_EQ(env->configure({{"penalty", -1}}), "options.penalty: expected a number >= 0");
  EXPECT_EQ(env->configure({{"tries", 3}}), "options.tries: unknown (guess_number takes: penalty)");
  environment::task t;
  t.label = "forty-two";
  try {
    env->open(t, "e");
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "guess_number: the task's label 'forty-two' is not a number");
  }
}

TEST(GuessNumber, ThePluginAddsTheEnvironmentToTheOfferedRegistry) {
  auto envs = environment::builtin_environments();
  ASSERT_FALSE(envs.contains("guess_number"));
  runtime::extension_points extensions;
  extensions.offer(environment::kEnvironmentExtension, &envs);
  runtime::kind_registry kinds;
  caf::actor_system_config config;
  EXPECT_EQ(
      runtime::load_plugin_file(MILESRT_CUSTOM_ENVIRONMENT_PLUGIN, {&kinds, &config, &extensions}),
      "");
  EXPECT_TRUE(envs.contains("guess_number"));
  auto made = envs.make("guess_number");
  EXPECT_EQ(made->configure(json::object()), "");
  const auto error =
      runtime::load_plugin_file(MILESRT_CUSTOM_ENVIRONMENT_PLUGIN, {&kinds, &config, nullptr});
  EXPECT_NE(error.find("offers no environments"), std::string::npos) << error;
}

}  // namespace
}  // namespace milesrt::examples
