#include "examples/bench_reward/even_token_reward.hpp"

#include <caf/all.hpp>
#include <cmath>

#include "actors/lib/llm/messages.hpp"
#include "runtime/core/interfaces.hpp"

namespace milesrt::examples {
namespace {
using namespace milesrt::runtime;
using llm::sample_group;

stage_actor::behavior_type even_token_reward_fn(stage_actor::pointer) {
  return {
      [=](process_atom, const std::string& port, const envelope& e) -> caf::result<node_reply> {
        if (port != "groups" || !e.payload.match_elements<sample_group>()) {
          return caf::make_error(caf::sec::unexpected_message,
                                 "even_token_reward: port 'groups' expects a sample_group");
        }
        auto group = e.payload.get_as<sample_group>(0);
        double sum = 0, sq = 0;
        for (auto& s : group.samples) {
          s.reward = float(even_token_share(s.output));
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

double even_token_share(const std::vector<int64_t>& tokens) {
  if (tokens.empty()) return 0;
  size_t even = 0;
  for (int64_t t : tokens) even += t % 2 == 0;
  return double(even) / double(tokens.size());
}

void register_even_token_reward(runtime::kind_registry& registry) {
  kind_descriptor k;
  k.name = "even_token_reward";
  k.summary = "rewards each completion with the share of its token ids that are even (benchmarks)";
  k.role = role::stage;
  k.inputs = {{"groups", llm::port_type::sample_group, "the samples of one prompt"}};
  k.outputs = {{"scored", llm::port_type::scored_group, "the group with each sample's reward"}};
  k.spawn = [](caf::actor_system& sys, const actor_setup&) -> caf::actor {
    return caf::actor_cast<caf::actor>(sys.spawn(even_token_reward_fn));
  };
  k.restartable = true;
  registry.add(k);
  // sample_group's type IDs (the rollout's block); adding them twice is harmless.
  registry.add_types(
      [](caf::actor_system_config& cfg) { cfg.add_message_types<caf::id_block::milesrt_llm>(); });
}

}  // namespace milesrt::examples
