#include "actors/teacher/teacher_kind.hpp"

#include <caf/all.hpp>
#include <optional>

#include "actors/lib/llm/agreement.hpp"
#include "actors/lib/llm/device.hpp"
#include "actors/lib/llm/messages.hpp"
#include "actors/lib/llm/model_ref.hpp"
#include "actors/lib/llm/shared_bases.hpp"
#include "actors/teacher/teacher_source.hpp"
#include "milesrt/teacher.capnp.h"
#include "runtime/core/errors.hpp"
#include "runtime/core/interfaces.hpp"
#include "runtime/core/timer.hpp"
#include "runtime/core/user_file.hpp"

namespace milesrt::teacher {
namespace {
using namespace milesrt::runtime;
using llm::sample_group;

struct teacher_state {
  std::unique_ptr<llm::decoder> model;  ///< a local teacher's (the source scores with it)
  std::unique_ptr<teacher_source> source;
  std::string name;
};

stage_actor::behavior_type teacher_fn(stage_actor::stateful_pointer<teacher_state> self,
                                      std::shared_ptr<teacher_state> init) {
  self->state = std::move(*init);
  return {
      [=](process_atom, const std::string& port, const envelope& e) -> caf::result<node_reply> {
        auto& st = self->state;
        const std::string who = "teacher '" + st.name + "'";
        if (port != "groups" && port != "samples")
          return caf::make_error(caf::sec::unexpected_message,
                                 who + ": no input port '" + port + "'");
        if (!e.payload.match_elements<sample_group>()) {
          return caf::make_error(caf::sec::unexpected_message,
                                 who + ": port '" + port + "' expects a sample_group");
        }
        auto group = e.payload.get_as<sample_group>(0);
        const timer t;
        try {
          auto lps = st.source->score(group);
          for (size_t i = 0; i < group.samples.size(); ++i)
            group.samples[i].teacher_logprobs = std::move(lps[i]);
        } catch (const std::exception& ex) {
          return runtime::to_error(ex, who + ", group " + std::to_string(group.group_id));
        }
        node_reply reply;
        reply.metrics["teacher_seconds"] = t.seconds();
        envelope out = e;
        out.payload = caf::make_message(std::move(group));
        reply.outputs.push_back({"groups", std::move(out)});
        return reply;
      },
      // Frozen: nothing to save beyond the graph's params.
      [=](snapshot_atom, const std::string&) { return actor_state{}; },
      [=](restore_atom, const std::string&, const actor_state&) { return true; },
  };
}

/// What validation says of the two tokenizers (none when nothing): a local teacher's is compared
/// with the student's now; a remote one's when the actor starts (it asks the server), so only the
/// student's folder is read here.
problem_list tokenizer_problems(const std::string& model, const std::string& student) {
  std::optional<llm::tokenizer_fingerprint> teacher;
  if (!model.empty()) {
    try {
      teacher = llm::fingerprint_of(model);
    } catch (const std::invalid_argument& e) {
      return {problem_of("model", e)};
    }
  }
  try {
    if (teacher)
      require_same_tokenizer(*teacher, student);
    else
      llm::fingerprint_of(student);
  } catch (const std::invalid_argument& e) {
    return {problem_of("student", e)};
  }
  return {};
}

problem_list check(capnp::DynamicStruct::Reader reader) {
  auto p = reader.as<schema::TeacherParams>();
  problem_list problems;
  const std::string model = p.getModel(), url = p.getUrl(), student = p.getStudent();
  if (!url.empty() && !model.empty()) {
    problems.push_back({"model", "a local teacher (model) or a remote one (url), not both"});
  } else if (url.empty()) {
    problems = llm::model_ref_problems(llm::model_ref_of(reader), llm::model_use::weights);
  } else if (url.rfind("http://", 0) != 0) {
    problems.push_back({"url", "'" + url + "' is not an http:// URL"});
  }
  if (student.empty()) {
    problems.push_back({"student",
                        "required (the student's model folder, whose tokenizer the teacher's "
                        "must equal)"});
  } else if (runtime::named_files_read() && problems.empty()) {
    for (auto& problem : tokenizer_problems(model, student)) problems.push_back(problem);
  }
  if (!(p.getTemperature() > 0)) problems.push_back({"temperature", "must be > 0"});
  if (!(p.getTimeoutSeconds() > 0)) problems.push_back({"timeoutSeconds", "must be > 0"});
  return problems;
}

caf::actor spawn_teacher(caf::actor_system& sys, const actor_setup& s) {
  auto p = s.params_struct->as<schema::TeacherParams>();
  for (const auto& problem : check(*s.params_struct))
    throw std::invalid_argument(within("params.teacher", problem).text());
  auto init = std::make_shared<teacher_state>();
  init->name = s.name;
  const std::string model = p.getModel();
  if (!model.empty()) {
    // Frozen: the parameters an engine or trainer of this process loaded from the same folder.
    init->model = s.store->get_or_make<llm::shared_bases>()->load(
        model, llm::to_dtype(p.getDtype()), llm::to_device(p.getDevice()));
    init->source = local_teacher(*init->model, model, p.getTemperature());
  } else {
    remote_teacher_config c;
    c.url = p.getUrl();
    c.temperature = p.getTemperature();
    c.timeout_seconds = p.getTimeoutSeconds();
    c.retries = p.getRetries();
    init->source = remote_teacher(std::move(c));
  }
  require_same_tokenizer(init->source->fingerprint(), p.getStudent());
  // Forward passes and requests block: a thread of its own.
  return caf::actor_cast<caf::actor>(sys.spawn<caf::detached>(teacher_fn, init));
}

}  // namespace

void register_teacher_kind(kind_registry& registry) {
  kind_descriptor k;
  k.name = "teacher";
  k.summary =
      "on-policy distillation's teacher (a local model or a remote server): sets each "
      "sample's teacher_logprobs";
  k.role = role::stage;
  k.inputs = {{"groups", llm::port_type::scored_group, "a scored group (after a reward)"},
              {"samples", llm::port_type::sample_group,
               "a group as sampled (pure distillation: every reward stays 0)"}};
  k.outputs = {
      {"groups", llm::port_type::scored_group, "the group with each sample's teacher log-probs"}};
  k.params_member = "teacher";
  k.check_params = check;
  k.graph_settings = [](capnp::DynamicStruct::Reader r) -> std::vector<graph_setting> {
    return {{"temperature", "temperature",
             llm::temperature_agreement(r.as<schema::TeacherParams>().getTemperature())}};
  };
  k.spawn = spawn_teacher;
  k.restartable = true;  // frozen: a fresh replica is the same
  registry.add(k);
  registry.add_types(
      [](caf::actor_system_config& cfg) { cfg.add_message_types<caf::id_block::milesrt_llm>(); });
}

}  // namespace milesrt::teacher
