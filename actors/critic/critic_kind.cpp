#include "actors/critic/critic_kind.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <caf/all.hpp>
#include <chrono>
#include <map>
#include <sstream>

#include "actors/critic/critic_core.hpp"
#include "actors/lib/llm/device.hpp"
#include "actors/lib/llm/model_folder.hpp"
#include "actors/lib/llm/model_ref.hpp"
#include "milesrt/critic.capnp.h"
#include "runtime/core/errors.hpp"
#include "runtime/core/interfaces.hpp"
#include "runtime/core/timer.hpp"

namespace milesrt::critic {
namespace {
using namespace milesrt::runtime;
using llm::sample_group;

struct critic_state {
  std::unique_ptr<critic_core> core;
  std::string name;
  uint32_t train_batch = 1;
  uint64_t version = 0;  ///< steps trained (the learner's version)
};

/// The inline part of a snapshot: a tag, the optimizer's steps and the version (the weights and
/// the optimizer state go to files).
std::vector<uint8_t> encode_state(caf::actor_system& sys, const critic_state& st) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  std::string tag = "critic-state-2";
  uint64_t steps = st.core->optimizer_steps();
  uint64_t version = st.version;
  if (auto err = sink(tag, steps, version))
    throw std::runtime_error("cannot serialize the critic's state");
  return {buf.begin(), buf.end()};
}

bool decode_state(caf::actor_system& sys, critic_state& st, const std::vector<uint8_t>& bytes) {
  std::vector<char> buf(bytes.begin(), bytes.end());
  caf::binary_deserializer source{sys, buf};
  std::string tag;
  uint64_t steps = 0, version = 0;
  if (source(tag, steps, version) || tag != "critic-state-2") return false;
  st.version = version;
  return true;
}

/// A learner that also sets values on the groups passing its "groups" port.
using critic_actor =
    learner_actor::extend<caf::replies_to<process_atom, std::string, envelope>::with<node_reply>>;

/// A group passing the "groups" port: each sample gets its output tokens' values.
caf::result<node_reply> set_values(critic_state& st, const std::string& port, const envelope& e) {
  const std::string who = "critic '" + st.name + "'";
  if (port == "train") {
    return caf::make_error(
        caf::sec::unexpected_message,
        who + ": port 'train' takes the learner's batches (train), not single items");
  }
  if (port != "groups") {
    return caf::make_error(caf::sec::unexpected_message, who + ": no input port '" + port + "'");
  }
  if (!e.payload.match_elements<sample_group>()) {
    return caf::make_error(caf::sec::unexpected_message,
                           who + ": port '" + port + "' expects a sample_group");
  }
  node_reply reply;
  auto group = e.payload.get_as<sample_group>(0);
  try {
    const timer t0;
    auto values = st.core->values(group.samples);
    double sum = 0, n = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      for (float v : values[i]) sum += v, n += 1;
      group.samples[i].values = std::move(values[i]);
    }
    if (n > 0) reply.metrics["critic_value_mean"] = sum / n;
    reply.metrics["critic_seconds"] = t0.seconds();
    envelope out = e;
    out.payload = caf::make_message(std::move(group));
    reply.outputs.push_back({"groups", std::move(out)});
    return reply;
  } catch (const std::exception& ex) {
    return runtime::to_error(
        ex, who + ", port '" + port + "', group " + std::to_string(group.group_id));
  }
}

/// A learner's step: the step's groups (those of the policy's batch), one optimizer step per
/// trainBatch of them; the metrics are their means.
caf::result<train_reply> train_step(critic_state& st, uint64_t step,
                                    const std::vector<envelope>& batch) {
  const std::string who = "critic '" + st.name + "', step " + std::to_string(step);
  train_reply reply;
  std::map<std::string, double> sums;
  size_t chunks = 0;
  try {
    for (size_t from = 0; from < batch.size(); from += st.train_batch) {
      std::vector<llm::sample_msg> samples;
      std::vector<size_t> sizes;
      for (size_t i = from; i < std::min(batch.size(), from + st.train_batch); ++i) {
        if (!batch[i].payload.match_elements<sample_group>()) {
          return caf::make_error(caf::sec::unexpected_message,
                                 who + ": its batch holds an item that is not a sample_group");
        }
        auto g = batch[i].payload.get_as<sample_group>(0);
        sizes.push_back(g.samples.size());
        for (auto& s : g.samples) samples.push_back(std::move(s));
      }
      auto m = st.core->train(samples, sizes);
      // critic_value_mean is the "groups" port's (the values the trainer sees).
      m.erase("critic_value_mean");
      for (const auto& [k, v] : m) sums[k] += v;
      chunks++;
    }
  } catch (const std::exception& ex) {
    return runtime::to_error(ex, who);
  }
  for (const auto& [k, v] : sums) reply.metrics[k] = v / double(chunks);
  reply.version = ++st.version;
  return reply;
}

critic_actor::behavior_type critic_fn(critic_actor::stateful_pointer<critic_state> self,
                                      std::shared_ptr<critic_state> init) {
  self->state = std::move(*init);
  return {
      [=](process_atom, const std::string& port, const envelope& e) {
        return set_values(self->state, port, e);
      },
      [=](train_atom, uint64_t step, const std::vector<envelope>& batch) {
        return train_step(self->state, step, batch);
      },
      [=](snapshot_atom, const std::string& dir) -> caf::result<actor_state> {
        auto& st = self->state;
        try {
          st.core->save(dir);
          return actor_state{encode_state(self->system(), st)};
        } catch (const std::exception& ex) {
          return runtime::to_error(ex, "critic '" + st.name + "'");
        }
      },
      [=](restore_atom, const std::string& dir, const actor_state& state) -> caf::result<bool> {
        auto& st = self->state;
        if (!decode_state(self->system(), st, state.bytes)) return false;
        try {
          st.core->restore(dir);
        } catch (const std::exception& ex) {
          return runtime::to_error(ex, "critic '" + st.name + "'");
        }
        return true;
      },
  };
}

problem_list check(capnp::DynamicStruct::Reader reader) {
  auto p = reader.as<schema::CriticParams>();
  problem_list problems;
  auto bad = [&](problem p) { problems.push_back(std::move(p)); };
  for (auto& e : llm::model_ref_problems(llm::model_ref_of(reader), llm::model_use::weights))
    bad(e);
  if (!(p.getLr() > 0)) bad({"lr", "must be > 0"});
  if (!(p.getWeightDecay() >= 0)) bad({"weightDecay", "must be >= 0"});
  if (!(p.getGradClip() >= 0)) bad({"gradClip", "must be >= 0 (0 = off)"});
  if (!(p.getValueClip() >= 0)) bad({"valueClip", "must be >= 0 (0 = off)"});
  if (!(p.getGamma() >= 0 && p.getGamma() <= 1)) bad({"gamma", "must be in [0, 1]"});
  if (!(p.getLambda() >= 0 && p.getLambda() <= 1)) bad({"lambda", "must be in [0, 1]"});
  if (p.getTrainBatch() == 0) bad({"trainBatch", "must be at least 1"});
  return problems;
}

}  // namespace

void register_critic_kind(kind_registry& registry) {
  kind_descriptor k;
  k.name = "critic";
  k.summary =
      "PPO's value model, a second learner: sets each sample's values (for gae) and trains each "
      "step on the policy's groups";
  k.role = role::learner;
  k.inputs = {{"groups", llm::port_type::scored_group,
               "a scored group to give values (item by item)", true},
              {"train", llm::port_type::scored_group,
               "the groups the policy learner gets: each step trains on those of its batch"}};
  k.outputs = {{"groups", llm::port_type::scored_group, "the group with each sample's values"}};
  k.params_member = "critic";
  k.check_params = check;
  k.spawn = [](caf::actor_system& sys, const actor_setup& s) -> caf::actor {
    auto p = s.params_struct->as<schema::CriticParams>();
    for (const auto& problem : check(*s.params_struct))
      throw std::invalid_argument(within("params.critic", problem).text());
    critic_options o;
    o.optimizer.lr = p.getLr();
    o.optimizer.weight_decay = p.getWeightDecay();
    o.optimizer.grad_clip = p.getGradClip();
    o.value_clip = p.getValueClip();
    o.gamma = p.getGamma();
    o.lambda = p.getLambda();
    auto init = std::make_shared<critic_state>();
    init->name = s.name;
    init->train_batch = p.getTrainBatch();
    init->core = critic_core::load(std::string(p.getModel()), llm::to_dtype(p.getDtype()),
                                   llm::to_device(p.getDevice()), o);
    // Forward and backward passes block: a thread of its own.
    return caf::actor_cast<caf::actor>(sys.spawn<caf::detached>(critic_fn, init));
  };
  registry.add(k);
  registry.add_types(
      [](caf::actor_system_config& cfg) { cfg.add_message_types<caf::id_block::milesrt_llm>(); });
}

}  // namespace milesrt::critic
