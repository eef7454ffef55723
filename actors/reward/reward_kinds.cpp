#include "actors/reward/reward_kinds.hpp"

#include <caf/all.hpp>
#include <cmath>

#include "actors/lib/tasks/math_answer.hpp"
#include "actors/reward/remote_reward.hpp"
#include "milesrt/reward.capnp.h"
#include "runtime/core/errors.hpp"
#include "runtime/core/failure.hpp"
#include "runtime/core/interfaces.hpp"
#include "runtime/core/timer.hpp"
#include "runtime/http/http_client.hpp"

namespace milesrt::reward {
namespace {
using namespace milesrt::runtime;
using llm::sample_group;

/// The group of an envelope arriving on "groups", or an error naming the kind.
caf::expected<sample_group> group_of(const char* kind, const std::string& port, const envelope& e) {
  if (port != "groups") {
    return caf::make_error(caf::sec::unexpected_message,
                           std::string(kind) + ": no input port '" + port + "'");
  }
  if (!e.payload.match_elements<sample_group>()) {
    return caf::make_error(caf::sec::unexpected_message,
                           std::string(kind) + ": port 'groups' expects a sample_group");
  }
  return e.payload.get_as<sample_group>(0);
}

/// The scored group in an envelope with the incoming one's header (origin, versions).
node_reply scored(const envelope& in, sample_group group, metric_map metrics) {
  envelope out = in;
  out.payload = caf::make_message(std::move(group));
  node_reply reply;
  reply.outputs.push_back({"scored", std::move(out)});
  reply.metrics = std::move(metrics);
  return reply;
}

struct math_options {
  double correct = 1, wrong = 0, no_answer = 0;
};

stage_actor::behavior_type math_fn(stage_actor::pointer self, math_options o) {
  static_cast<void>(self);
  return {
      [=](process_atom, const std::string& port, const envelope& e) -> caf::result<node_reply> {
        auto group = group_of("math_reward", port, e);
        if (!group) return std::move(group.error());
        double found = 0, correct = 0;
        for (auto& s : group->samples) {
          auto j = tasks::judge_math(s.text, group->label);
          found += j.found;
          correct += j.correct;
          s.reward = float(!j.found ? o.no_answer : j.correct ? o.correct : o.wrong);
        }
        metric_map m = reward_metrics(group->samples);
        const double n = std::max<double>(1, group->samples.size());
        m["accuracy"] = correct / n;
        m["answer_found"] = found / n;
        return scored(e, std::move(*group), std::move(m));
      },
      [=](snapshot_atom, const std::string&) { return actor_state{}; },
      [=](restore_atom, const std::string&, const actor_state&) { return true; },
  };
}

stage_actor::behavior_type remote_fn(stage_actor::pointer self, remote_reward_config config) {
  static_cast<void>(self);
  return {
      [=](process_atom, const std::string& port, const envelope& e) -> caf::result<node_reply> {
        auto group = group_of("remote_reward", port, e);
        if (!group) return std::move(group.error());
        // Blocking: this actor runs on a thread of its own (spawned detached).
        const timer t;
        std::vector<float> rewards;
        try {
          rewards = fetch_rewards(config, *group);
        } catch (const std::exception& ex) {
          return runtime::to_error(ex, "remote_reward");
        }
        for (size_t i = 0; i < rewards.size(); ++i) group->samples[i].reward = rewards[i];
        metric_map m = reward_metrics(group->samples);
        m["remote_reward_seconds"] = t.seconds();
        return scored(e, std::move(*group), std::move(m));
      },
      [=](snapshot_atom, const std::string&) { return actor_state{}; },
      [=](restore_atom, const std::string&, const actor_state&) { return true; },
  };
}

const std::vector<port_spec> reward_inputs = {
    {"groups", llm::port_type::sample_group, "the samples of one prompt"}};
const std::vector<port_spec> reward_outputs = {
    {"scored", llm::port_type::scored_group, "the group with each sample's reward"}};

}  // namespace

metric_map reward_metrics(const std::vector<llm::sample_msg>& samples) {
  metric_map m;
  if (samples.empty()) return m;
  double sum = 0, sq = 0;
  for (const auto& s : samples) sum += s.reward;
  const double mean = sum / double(samples.size());
  for (const auto& s : samples) sq += (s.reward - mean) * (s.reward - mean);
  m["reward_mean"] = mean;
  m["reward_std"] = std::sqrt(sq / double(samples.size()));
  return m;
}

void register_reward_kinds(runtime::kind_registry& registry) {
  kind_descriptor math;
  math.name = "math_reward";
  math.summary = "scores each sample's final answer against the group's label";
  math.role = role::stage;
  math.inputs = reward_inputs;
  math.outputs = reward_outputs;
  math.params_member = "mathReward";
  math.check_params = [](capnp::DynamicStruct::Reader reader) {
    auto p = reader.as<schema::MathRewardParams>();
    problem_list problems;
    for (auto [name, v] : {std::pair<const char*, double>{"correct", p.getCorrect()},
                           {"wrong", p.getWrong()},
                           {"noAnswer", p.getNoAnswer()}}) {
      if (!std::isfinite(v)) problems.push_back({name, "must be a finite number"});
    }
    return problems;
  };
  math.spawn = [](caf::actor_system& sys, const actor_setup& s) -> caf::actor {
    auto p = s.params_struct->as<schema::MathRewardParams>();
    return caf::actor_cast<caf::actor>(
        sys.spawn(math_fn, math_options{p.getCorrect(), p.getWrong(), p.getNoAnswer()}));
  };
  math.restartable = true;  // stateless
  registry.add(math);

  kind_descriptor remote;
  remote.name = "remote_reward";
  remote.summary = "asks an HTTP server for the rewards of each group";
  remote.role = role::stage;
  remote.inputs = reward_inputs;
  remote.outputs = reward_outputs;
  remote.params_member = "remoteReward";
  remote.check_params = [](capnp::DynamicStruct::Reader reader) {
    auto p = reader.as<schema::RemoteRewardParams>();
    problem_list problems;
    if (p.getUrl().size() == 0) {
      problems.push_back({"url", "required (http://host:port/path)"});
    } else {
      try {
        parse_http_url(p.getUrl());
      } catch (const std::invalid_argument& e) {
        problems.push_back({"url", "'" + std::string(p.getUrl()) + "': " + e.what()});
      }
    }
    if (!(p.getTimeoutSeconds() > 0)) problems.push_back({"timeoutSeconds", "must be > 0"});
    if (!(p.getBackoffSeconds() >= 0)) problems.push_back({"backoffSeconds", "must be >= 0"});
    return problems;
  };
  remote.spawn = [](caf::actor_system& sys, const actor_setup& s) -> caf::actor {
    auto p = s.params_struct->as<schema::RemoteRewardParams>();
    remote_reward_config c;
    c.url = p.getUrl();
    c.timeout_seconds = p.getTimeoutSeconds();
    c.retries = p.getRetries();
    c.backoff_seconds = p.getBackoffSeconds();
    in_context("params.remoteReward.url: '" + c.url + "'", [&] { parse_http_url(c.url); });
    // HTTP requests block: the actor gets a thread of its own.
    return caf::actor_cast<caf::actor>(sys.spawn<caf::detached>(remote_fn, c));
  };
  remote.restartable = true;
  registry.add(remote);
  registry.add_types(
      [](caf::actor_system_config& cfg) { cfg.add_message_types<caf::id_block::milesrt_llm>(); });
}

}  // namespace milesrt::reward
