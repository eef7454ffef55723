#pragma once
/// The environments the `environment` kind runs episodes of: one interface, one file per
/// environment (calculator_env.cpp, remote_env.cpp), and a registry that plugins add to
/// (examples/custom_environment/). The kind's actor owns the conversation, the tokens and the
/// limits; an environment only answers the model's messages.
///
/// An episode: `reset` gives the opening messages (a user's question, say); then, turn by turn,
/// the model's reply (an assistant message, its tool calls already parsed) goes to `step`, which
/// answers with the messages that follow (tool results, a user's next question), a reward, and
/// whether the episode is done. The episode's reward is the sum of its steps' rewards.
///
/// Episodes run on the kind's actor, a thread of its own: an environment may block (the remote
/// one waits on HTTP). A failure that is the environment's, not the model's (a remote server that
/// does not answer), throws std::runtime_error naming it; the run then stops with that message.

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "actors/lib/rl/registry.hpp"
#include "runtime/core/problem.hpp"

namespace milesrt::environment {

using json = nlohmann::ordered_json;

/// One task, as the data source gave it.
struct task {
  std::string prompt;             ///< the prompt's text ("" when it came as messages)
  json messages = json::array();  ///< the prompt as chat messages (empty when it came as text)
  std::string label;              ///< the reference answer, for the environment's checker
  uint64_t group_id = 0;
};

/// What the environment answers.
struct observation {
  /// Messages that follow in the conversation (`role` user or tool, OpenAI's form; a tool's
  /// answer carries the `tool_call_id` it answers).
  json messages = json::array();
  double reward = 0;
  bool done = false;
  /// The tools offered to the model from here on (OpenAI's form), rendered by the chat template;
  /// null: as before (reset: the environment's `tools()`).
  json tools = nullptr;
  /// Tool calls this step ran, and of them the ones that failed (an unknown tool, arguments it
  /// could not use): the kind's tool-call metrics.
  uint32_t tool_calls = 0, tool_errors = 0;
};

class episode {
 public:
  virtual ~episode() = default;
  /// The opening messages (at least one); `done` is ignored.
  virtual observation reset() = 0;
  /// The model's reply: `{"role": "assistant", "content": ..., "tool_calls": [...]}` (calls as
  /// agent::assistant_message gives them, arguments a JSON string).
  virtual observation step(const json& message) = 0;
};

class environment {
 public:
  virtual ~environment() = default;
  /// Takes the options (params.environment.options, a JSON object); "" or what is wrong with
  /// them, naming the option. Called once, before any episode.
  virtual std::string configure(const json& options) = 0;
  /// The tools offered to the model (OpenAI's form; empty: none).
  virtual json tools() const { return json::array(); }
  /// A new episode of `t`; `id` is unique within the run ("g3-e1": group 3, episode 1).
  virtual std::unique_ptr<episode> open(const task& t, const std::string& id) = 0;
};

using environment_registry = rl::registry<environment>;

/// The name under which milesrt offers plugins the registry of environments.
inline constexpr const char* kEnvironmentExtension = "milesrt.environment.environments";

/// calculator, remote.
environment_registry builtin_environments();

// One factory per built-in, each defined in its own file.
std::unique_ptr<environment> make_calculator_environment();
std::unique_ptr<environment> make_remote_environment();

/// A JSON object of options; throws problem_error naming `field` ("options: not JSON: ...").
json parse_options(const std::string& text, const std::string& field);

}  // namespace milesrt::environment
