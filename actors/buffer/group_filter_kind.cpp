#include "actors/buffer/group_filter_kind.hpp"

#include <caf/all.hpp>

#include "actors/lib/llm/messages.hpp"
#include "milesrt/reward.capnp.h"
#include "runtime/core/interfaces.hpp"

namespace milesrt::buffer {
namespace {
using namespace milesrt::runtime;
using llm::sample_group;

/// Whether every sample of the group has the same reward (an empty group counts as uniform).
bool uniform_rewards(const sample_group& g) {
  for (const auto& s : g.samples) {
    if (s.reward != g.samples.front().reward) return false;
  }
  return true;
}

stage_actor::behavior_type filter_fn(stage_actor::pointer self, bool dynamic_sampling) {
  static_cast<void>(self);
  return {
      [=](process_atom, const std::string& port, const envelope& e) -> caf::result<node_reply> {
        if (port != "groups") {
          return caf::make_error(caf::sec::unexpected_message,
                                 "group_filter: no input port '" + port + "'");
        }
        if (!e.payload.match_elements<sample_group>()) {
          return caf::make_error(caf::sec::unexpected_message,
                                 "group_filter: port 'groups' expects a sample_group");
        }
        node_reply reply;
        // Reported for every group, so that the step's mean is the fraction filtered out.
        const bool drop = dynamic_sampling && uniform_rewards(e.payload.get_as<sample_group>(0));
        reply.metrics["filtered_groups"] = drop ? 1 : 0;
        if (!drop) reply.outputs.push_back({"groups", e});
        return reply;
      },
      [=](snapshot_atom, const std::string&) { return actor_state{}; },
      [=](restore_atom, const std::string&, const actor_state&) { return true; },
  };
}

}  // namespace

void register_group_filter_kind(runtime::kind_registry& registry) {
  kind_descriptor k;
  k.name = "group_filter";
  k.summary = "drops groups whose rewards are all equal (dynamic sampling)";
  k.role = role::stage;
  k.inputs = {{"groups", llm::port_type::scored_group, "a scored group"}};
  k.outputs = {{"groups", llm::port_type::scored_group, "the groups that carry a learning signal"}};
  k.params_member = "groupFilter";
  k.spawn = [](caf::actor_system& sys, const actor_setup& s) -> caf::actor {
    auto p = s.params_struct->as<schema::GroupFilterParams>();
    return caf::actor_cast<caf::actor>(sys.spawn(filter_fn, p.getDynamicSampling()));
  };
  k.restartable = true;  // stateless
  registry.add(k);
  registry.add_types(
      [](caf::actor_system_config& cfg) { cfg.add_message_types<caf::id_block::milesrt_llm>(); });
}

}  // namespace milesrt::buffer
