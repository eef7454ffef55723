#include "examples/custom_reward/length_reward.hpp"

#include <caf/all.hpp>
#include <cmath>

#include "actors/lib/llm/messages.hpp"
#include "runtime/core/interfaces.hpp"

namespace milesrt::examples {
namespace {
using namespace milesrt::runtime;
using llm::sample_group;

stage_actor::behavior_type length_reward_fn(stage_actor::pointer, uint64_t target, double scale) {
  return {
      [=](process_atom, const std::string& port, const envelope& e) -> caf::result<node_reply> {
        if (port != "groups" || !e.payload.match_elements<sample_group>()) {
          return caf::make_error(caf::sec::unexpected_message,
                                 "length_reward: port 'groups' expects a sample_group");
        }
        auto group = e.payload.get_as<sample_group>(0);
        double sum = 0, sq = 0;
        for (auto& s : group.samples) {
          s.reward = float(length_score(s.output.size(), target, scale));
          sum += s.reward;
        }
        const double n = std::max<double>(1, group.samples.size()), mean = sum / n;
        for (const auto& s : group.samples) sq += (s.reward - mean) * (s.reward - mean);
        node_reply reply;
        reply.metrics["reward_mean"] = mean;
        reply.metrics["reward_std"] = std::sqrt(sq / n);
        envelope out = e;  // keeps origin and versions
        out.payload = caf::make_message(std::move(group));
        reply.outputs.push_back({"scored", std::move(out)});
        return reply;
      },
      // Stateless: nothing to checkpoint.
      [=](snapshot_atom, const std::string&) { return actor_state{}; },
      [=](restore_atom, const std::string&, const actor_state&) { return true; },
  };
}

}  // namespace

double length_score(uint64_t tokens, uint64_t target, double scale) {
  const double off = std::fabs(double(tokens) - double(target)) / double(target);
  return scale * std::max(0.0, 1.0 - off);
}

void register_length_reward(runtime::kind_registry& registry) {
  kind_descriptor k;
  k.name = "length_reward";
  k.summary = "rewards completions whose length is close to a target (an example plugin)";
  k.role = role::stage;
  k.inputs = {{"groups", llm::port_type::sample_group, "the samples of one prompt"}};
  k.outputs = {{"scored", llm::port_type::scored_group, "the group with each sample's reward"}};
  // Custom kinds declare their parameters; the graph's `custom` list is checked against them.
  k.params = {
      {"target_length", param_type::integer, "the completion length (tokens) that earns the most",
       false, int64_t{64}, 1.0, std::nullopt},
      {"scale", param_type::real, "the reward of a completion of exactly the target length", false,
       1.0, std::nullopt, std::nullopt}};
  k.spawn = [](caf::actor_system& sys, const actor_setup& s) -> caf::actor {
    const auto target = uint64_t(std::get<int64_t>(s.params.at("target_length")));
    const double scale = std::get<double>(s.params.at("scale"));
    return caf::actor_cast<caf::actor>(sys.spawn(length_reward_fn, target, scale));
  };
  k.restartable = true;
  registry.add(k);
  // sample_group's type IDs (the rollout's block); adding them twice is harmless.
  registry.add_types(
      [](caf::actor_system_config& cfg) { cfg.add_message_types<caf::id_block::milesrt_llm>(); });
}

}  // namespace milesrt::examples
