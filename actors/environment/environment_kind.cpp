#include "actors/environment/environment_kind.hpp"

#include <caf/all.hpp>
#include <cmath>
#include <filesystem>

#include "actors/environment/environment_actor.hpp"
#include "actors/lib/llm/messages.hpp"
#include "actors/lib/llm/model_ref.hpp"
#include "actors/lib/llm/tokenizer/chat_template.hpp"
#include "actors/lib/llm/tokenizer/tokenizer.hpp"
#include "actors/lib/serving/generate_messages.hpp"
#include "actors/lib/tasks/jsonl_dataset.hpp"
#include "milesrt/environment.capnp.h"
#include "runtime/core/user_file.hpp"

namespace milesrt::environment {
namespace {
using namespace milesrt::runtime;
namespace fs = std::filesystem;

/// An environment made and configured with `options_text` (the params' `field`); throws
/// problem_error naming the field when the name or the options are wrong.
std::unique_ptr<environment> make_configured(const environment_registry& envs,
                                             const std::string& name,
                                             const std::string& options_text,
                                             const std::string& field) {
  if (auto bad = envs.check(name); !bad.empty()) throw problem_error({"environment", bad});
  json options = parse_options(options_text, field);
  auto env = envs.make(name);
  if (auto bad = env->configure(options); !bad.empty())
    throw problem_error({field + " (" + name + ")", bad});
  return env;
}

/// make_configured's refusal as a problem of the params.
void check_configured(const environment_registry& envs, const std::string& name,
                      const std::string& options_text, const std::string& field,
                      problem_list& problems) {
  try {
    make_configured(envs, name, options_text, field);
  } catch (const problem_error& e) {
    problems.push_back(e.get());
  }
}

problem_list check(const environment_registry& envs, capnp::DynamicStruct::Reader reader) {
  auto p = reader.as<schema::EnvironmentParams>();
  problem_list problems;
  check_configured(envs, p.getEnvironment(), p.getOptions(), "options", problems);
  for (auto& e : llm::model_ref_problems(llm::model_ref_of(reader), llm::model_use::tokenizer))
    problems.push_back(e);
  for (auto [field, v] :
       {std::pair{"samplesPerPrompt", p.getSamplesPerPrompt()},
        std::pair{"maxTurns", p.getMaxTurns()}, std::pair{"maxTokens", p.getMaxTokens()},
        std::pair{"maxNewTokens", p.getMaxNewTokens()}}) {
    if (v == 0) problems.push_back({field, "must be at least 1"});
  }
  for (auto [field, v] : {std::pair{"maxSeconds", p.getMaxSeconds()},
                          std::pair{"generateDeadlineSeconds", p.getGenerateDeadlineSeconds()}}) {
    if (!(v > 0) || !std::isfinite(v) || v > 1e7)
      problems.push_back({field, "must be > 0 and at most 1e7 seconds"});
  }
  for (auto [field, v] : {std::pair{"temperature", p.getTemperature()},
                          std::pair{"evalTemperature", p.getEvalTemperature()}}) {
    if (!(v >= 1e-5 && v <= 1e5)) problems.push_back({field, "must be from 1e-05 to 100000"});
  }
  if (!(p.getTopP() > 0 && p.getTopP() <= 1)) problems.push_back({"topP", "must be in (0, 1]"});
  const std::string eval = p.getEvalData();
  if (!eval.empty() && runtime::named_files_read() && !fs::is_regular_file(eval))
    problems.push_back({"evalData", "'" + eval + "' is not a file (JSONL tasks)"});
  if (p.getEvalOptions().size() > 0) {
    if (eval.empty()) problems.push_back({"evalOptions", "needs evalData"});
    check_configured(envs, p.getEnvironment(), p.getEvalOptions(), "evalOptions", problems);
  }
  return problems;
}

std::vector<task> load_tasks(const std::string& path) {
  std::vector<task> out;
  for (auto& r : tasks::load_jsonl(path)) {
    task t;
    t.prompt = r.prompt;
    t.label = r.label;
    if (!r.messages_json.empty()) t.messages = json::parse(r.messages_json);
    t.group_id = out.size();
    out.push_back(std::move(t));
  }
  return out;
}

caf::actor spawn(const environment_registry& envs, caf::actor_system& sys, const actor_setup& s) {
  auto p = s.params_struct->as<schema::EnvironmentParams>();
  const std::string where = "actor '" + s.name + "': params.environment.";
  actor_config cfg;
  cfg.name = p.getEnvironment();
  auto tok = llm::tokenizer::load(std::string(p.getModel()));
  if (!tok.tok) throw std::invalid_argument(where + "model: " + tok.error);
  auto tmpl = llm::chat_template::load(std::string(p.getChatTemplate()), *tok.tok);
  if (!tmpl.tmpl)
    throw std::invalid_argument(
        where +
        "chatTemplate: " + (tmpl.error.empty() ? "the model has no chat template" : tmpl.error));
  cfg.tok = tok.tok;
  cfg.tmpl = tmpl.tmpl;
  try {
    cfg.env = make_configured(envs, cfg.name, p.getOptions(), "options");
    if (p.getEvalOptions().size() > 0)
      cfg.eval_alt = make_configured(envs, cfg.name, p.getEvalOptions(), "evalOptions");
  } catch (const problem_error& e) {
    throw std::invalid_argument(where + e.what());
  }
  cfg.limits.max_turns = p.getMaxTurns();
  cfg.limits.max_tokens = p.getMaxTokens();
  cfg.limits.max_seconds = p.getMaxSeconds();
  cfg.limits.max_new_tokens = p.getMaxNewTokens();
  cfg.group_size = p.getSamplesPerPrompt();
  cfg.temperature = p.getTemperature();
  cfg.top_p = p.getTopP();
  cfg.generate_deadline =
      std::chrono::milliseconds(static_cast<int64_t>(p.getGenerateDeadlineSeconds() * 1000.0));
  if (p.getEvalData().size() > 0) cfg.eval_tasks = load_tasks(p.getEvalData());
  cfg.eval_every = p.getEvalInterval();
  cfg.eval_temperature = p.getEvalTemperature();
  cfg.seed = s.seed * 7919 + 23 + s.replica;
  return spawn_environment_actor(sys, std::move(cfg));
}

}  // namespace

void register_environment_kind(runtime::kind_registry& registry,
                               std::shared_ptr<const environment_registry> environments) {
  kind_descriptor k;
  k.name = "environment";
  k.summary = "runs multi-turn episodes of an environment against the rollout; one group per task";
  k.role = role::stage;
  k.inputs = {{"prompts", llm::port_type::prompt, "a task: its prompt and label"}};
  k.outputs = {{"groups", llm::port_type::scored_group,
                "the task's episodes, with their rewards and sampled-token masks"}};
  k.uses = {{"generate", serving::service_type::generate, "a rollout's generation service"}};
  k.params_member = "environment";
  k.check_params = [environments](capnp::DynamicStruct::Reader r) {
    return check(*environments, r);
  };
  k.spawn = [environments](caf::actor_system& sys, const actor_setup& s) {
    return spawn(*environments, sys, s);
  };
  registry.add(k);
  registry.add_types([](caf::actor_system_config& cfg) {
    cfg.add_message_types<caf::id_block::milesrt_llm>();
    cfg.add_message_types<caf::id_block::milesrt_serving>();
  });
}

}  // namespace milesrt::environment
