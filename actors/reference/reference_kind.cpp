#include "actors/reference/reference_kind.hpp"

#include <caf/all.hpp>
#include <chrono>

#include "actors/lib/llm/agreement.hpp"
#include "actors/lib/llm/device.hpp"
#include "actors/lib/llm/model_folder.hpp"
#include "actors/lib/llm/model_ref.hpp"
#include "actors/lib/llm/output_logprobs.hpp"
#include "actors/lib/llm/shared_bases.hpp"
#include "milesrt/reference.capnp.h"
#include "runtime/core/errors.hpp"
#include "runtime/core/interfaces.hpp"
#include "runtime/core/timer.hpp"

namespace milesrt::reference {
namespace {
using namespace milesrt::runtime;
using llm::sample_group;

struct reference_state {
  std::unique_ptr<llm::decoder> model;
  double temperature = 1.0;
  std::string name;
};

stage_actor::behavior_type reference_fn(stage_actor::stateful_pointer<reference_state> self,
                                        std::shared_ptr<reference_state> init) {
  self->state = std::move(*init);
  return {
      [=](process_atom, const std::string& port, const envelope& e) -> caf::result<node_reply> {
        auto& st = self->state;
        const std::string who = "reference '" + st.name + "'";
        if (port != "groups")
          return caf::make_error(caf::sec::unexpected_message,
                                 who + ": no input port '" + port + "'");
        if (!e.payload.match_elements<sample_group>()) {
          return caf::make_error(caf::sec::unexpected_message,
                                 who + ": port 'groups' expects a sample_group");
        }
        auto group = e.payload.get_as<sample_group>(0);
        const timer t;
        try {
          set_ref_logprobs(*st.model, st.temperature, group);
        } catch (const std::exception& ex) {
          return runtime::to_error(ex, who + ", group " + std::to_string(group.group_id));
        }
        node_reply reply;
        reply.metrics["ref_seconds"] = t.seconds();
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

problem_list check(capnp::DynamicStruct::Reader reader) {
  auto p = reader.as<schema::ReferenceParams>();
  auto problems = llm::model_ref_problems(llm::model_ref_of(reader), llm::model_use::weights);
  if (!(p.getTemperature() > 0)) problems.push_back({"temperature", "must be > 0"});
  return problems;
}

}  // namespace

void set_ref_logprobs(const llm::decoder& model, double temperature, sample_group& group) {
  auto lps = llm::output_logprobs(model, temperature, group);
  for (size_t i = 0; i < group.samples.size(); ++i)
    group.samples[i].ref_logprobs = std::move(lps[i]);
}

void register_reference_kind(kind_registry& registry) {
  kind_descriptor k;
  k.name = "reference";
  k.summary = "a frozen reference model: sets each sample's ref_logprobs (for KL to the reference)";
  k.role = role::stage;
  k.inputs = {{"groups", llm::port_type::scored_group, "a scored group"}};
  k.outputs = {
      {"groups", llm::port_type::scored_group, "the group with each sample's reference log-probs"}};
  k.params_member = "reference";
  k.check_params = check;
  k.graph_settings = [](capnp::DynamicStruct::Reader r) -> std::vector<graph_setting> {
    return {{"temperature", "temperature",
             llm::temperature_agreement(r.as<schema::ReferenceParams>().getTemperature())}};
  };
  k.spawn = [](caf::actor_system& sys, const actor_setup& s) -> caf::actor {
    auto p = s.params_struct->as<schema::ReferenceParams>();
    for (const auto& problem : check(*s.params_struct))
      throw std::invalid_argument(within("params.reference", problem).text());
    auto init = std::make_shared<reference_state>();
    init->name = s.name;
    init->temperature = p.getTemperature();
    // Frozen: the parameters a LoRA trainer or engine of this process loaded from the same
    // folder (its base is this model with the adapters off), else its own.
    init->model = s.store->get_or_make<llm::shared_bases>()->load(
        std::string(p.getModel()), llm::to_dtype(p.getDtype()), llm::to_device(p.getDevice()));
    // Forward passes block: a thread of its own.
    return caf::actor_cast<caf::actor>(sys.spawn<caf::detached>(reference_fn, init));
  };
  k.restartable = true;  // frozen: a fresh replica is the same
  registry.add(k);
  registry.add_types(
      [](caf::actor_system_config& cfg) { cfg.add_message_types<caf::id_block::milesrt_llm>(); });
}

}  // namespace milesrt::reference
