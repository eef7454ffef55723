#pragma once
/// The `environment` kind's actor: a stage whose input is tasks (prompts) and whose output is
/// sample groups. Each task becomes `group_size` episodes, run concurrently: the conversation is
/// rendered with the model's chat template into an agent::session (exact tokens: the model's as
/// sampled, the environment's masked out), each turn sampled through the graph's generation
/// service, the reply's tool calls parsed and handed to the environment, until the environment
/// says done or a limit (turns, tokens, time) ends the episode, counted by reason. A group is
/// answered when all its episodes ended.
///
/// Held-out evaluation (optional): when the first turn under version 0, evalInterval, ... comes
/// back, every held-out task runs once (greedy), with the environment and, beside it, with the
/// second one (evalOptions); the groups that end meanwhile are answered after it, so that in the
/// sync schedule every evaluation token is sampled under that one version. Its figures
/// (eval_env_*, eval_env_alt_*) ride on the next answer's metrics.

#include <caf/fwd.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/environment/environment.hpp"

namespace milesrt::llm {
class tokenizer;
class chat_template;
}  // namespace milesrt::llm

namespace milesrt::environment {

/// An episode's limits; the one it reaches first ends it.
struct episode_limits {
  uint32_t max_turns = 4;
  uint32_t max_tokens = 512;
  double max_seconds = 60;
  uint32_t max_new_tokens = 64;
};

/// What the actor is made with (the kind's params, loaded).
struct actor_config {
  std::string name = "environment";  ///< the environment's name, for messages
  std::shared_ptr<const llm::tokenizer> tok;
  std::shared_ptr<const llm::chat_template> tmpl;
  std::shared_ptr<environment> env;
  std::shared_ptr<environment> eval_alt;  ///< the second evaluation's (null: none)
  episode_limits limits;
  uint32_t group_size = 8;
  double temperature = 1.0, top_p = 1.0;
  std::chrono::milliseconds generate_deadline{600000};
  std::vector<task> eval_tasks;
  uint32_t eval_every = 0;
  double eval_temperature = 1e-5;
  uint64_t seed = 0;
};

/// Spawns the actor on a thread of its own (an environment may block). It answers process on
/// port "prompts", snapshot, restore and the runtime's `uses`.
caf::actor spawn_environment_actor(caf::actor_system& sys, actor_config config);

}  // namespace milesrt::environment
