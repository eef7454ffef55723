#include "actors/rollout/rollout_kind.hpp"

#include <ATen/ATen.h>

#include <caf/all.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>

#include "actors/lib/llm/agreement.hpp"
#include "actors/lib/llm/device.hpp"
#include "actors/lib/llm/lora_params.hpp"
#include "actors/lib/llm/messages.hpp"
#include "actors/lib/llm/model.hpp"
#include "actors/lib/llm/model_folder.hpp"
#include "actors/lib/llm/shared_bases.hpp"
#include "actors/lib/llm/text_codec.hpp"
#include "actors/lib/serving/engine.hpp"
#include "actors/lib/serving/generate_messages.hpp"
#include "actors/lib/weights/apply.hpp"
#include "actors/lib/weights/local_versions.hpp"
#include "actors/lib/weights/messages.hpp"
#include "actors/rollout/rollout_params.hpp"
#include "actors/rollout/rollout_state.hpp"
#include "milesrt/rollout.capnp.h"
#include "runtime/core/errors.hpp"
#include "runtime/core/interfaces.hpp"
#include "runtime/core/progress.hpp"
#include "runtime/core/timer.hpp"

namespace milesrt::rollout {
using llm::prompt_msg;
using llm::sample_group;
using llm::sample_msg;
using llm::text_codec;
using serving::generation_request;
using serving::generation_result;
using namespace milesrt::serving;  // the engine
namespace {
using namespace milesrt::runtime;

sample_msg to_msg(const sample& s, const text_codec* codec) {
  sample_msg m;
  if (codec) m.text = codec->decode(s.output);
  m.prompt = s.prompt;
  m.output = s.output;
  m.logprobs = s.logprobs;
  m.versions = s.versions;
  for (const auto& e : s.experts) m.experts.insert(m.experts.end(), e.begin(), e.end());
  m.finish_reason = s.finish_reason;
  return m;
}

/// The abort mode's totals, in every reply of a rollout that cuts samples off.
void add_abort_metrics(const rollout_state& st, node_reply& reply) {
  if (st.mode != pause_mode::abort) return;
  reply.metrics["rollout_aborted_samples"] = double(st.aborted_samples);
  if (st.resume_aborted) {
    reply.metrics["rollout_resumed_samples"] = double(st.resumed_samples);
  } else {
    reply.metrics["rollout_dropped_groups"] = double(st.dropped_groups);
  }
}

/// Answers a generation service's request with its one sample, finished or cut off ("abort").
bool answer_call(rollout_state& st, const sample& s) {
  auto it = st.calls.find(s.request_id);
  if (it == st.calls.end()) return false;
  it->second.promise.deliver(generation_result{s.output, s.logprobs, s.versions, s.finish_reason});
  st.calls.erase(it);
  return true;
}

/// Sends each streamed service call the tokens its sample gained since the last partial.
void send_partials(rollout_actor::stateful_pointer<rollout_state> self) {
  auto& st = self->state;
  for (auto& [id, c] : st.calls) {
    if (c.stream_id == 0 || !c.to) continue;
    sample s = st.eng->output_since(id, c.sent);
    if (s.output.empty()) continue;
    c.sent += s.output.size();
    caf::anon_send(caf::actor_cast<caf::actor>(c.to), serving::generate_atom::value,
                   serving::generation_partial{c.stream_id, std::move(s.output),
                                               std::move(s.logprobs), std::move(s.versions)});
  }
}

/// Delivers every group whose samples are all in.
void deliver_complete(rollout_actor::stateful_pointer<rollout_state> self,
                      const std::vector<sample>& done) {
  auto& st = self->state;
  for (const auto& s : done) {
    if (answer_call(st, s)) continue;
    auto it = st.groups.find(s.request_id);
    if (it == st.groups.end()) continue;
    auto& g = it->second;
    if (s.index < 0 || s.index >= st.base.n)
      throw std::logic_error("rollout: sample index " + std::to_string(s.index) +
                             " outside the group's " + std::to_string(st.base.n));
    g.samples.resize(size_t(st.base.n));
    g.samples[size_t(s.index)] = to_msg(s, st.codec.get());
    if (++g.received < st.base.n) continue;
    sample_group group{g.group_id, g.label, std::move(g.samples)};
    uint64_t lo = UINT64_MAX, hi = 0;
    for (const auto& m : group.samples) {
      for (auto v : m.versions) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
    envelope out;
    out.min_version = lo == UINT64_MAX ? st.eng->version() : lo;
    out.max_version = lo == UINT64_MAX ? st.eng->version() : hi;
    out.payload = caf::make_message(std::move(group));
    node_reply reply;
    reply.outputs.push_back({"groups", std::move(out)});
    auto stats = st.eng->stats();
    reply.metrics["rollout_prefix_hit_rate"] = stats.prefix_hit_rate;
    reply.metrics["rollout_preemptions"] = double(stats.preemptions);
    reply.metrics["rollout_kv_blocks_used"] = double(stats.used_blocks);
    reply.metrics["rollout_prefill_tokens"] = double(stats.prefill_tokens);
    reply.metrics["rollout_decode_tokens"] = double(stats.decode_tokens);
    if (st.busy_seconds > 0) {
      // Shares of the same engine time: prefill chunks and decode tokens run in one forward.
      reply.metrics["rollout_prefill_tokens_per_s"] =
          double(stats.prefill_tokens) / st.busy_seconds;
      reply.metrics["rollout_decode_tokens_per_s"] = double(stats.decode_tokens) / st.busy_seconds;
    }
    reply.metrics["rollout_running"] = double(stats.running);
    reply.metrics["rollout_waiting"] = double(stats.waiting);
    if (st.model->device().is_cuda()) {
      // The most allocated on the GPU since this rollout phase began, as of this group.
      reply.metrics["rollout_gpu_memory_peak_gib"] = llm::peak_memory_gib(st.model->device());
    }
    if (st.retake_seconds >= 0) reply.metrics["rollout_kv_retake_seconds"] = st.retake_seconds;
    add_abort_metrics(st, reply);
    g.promise.deliver(std::move(reply));
    st.groups.erase(it);
  }
}

void schedule_step(rollout_actor::stateful_pointer<rollout_state> self) {
  if (self->state.stepping) return;
  self->state.stepping = true;
  self->send(self, rstep_atom::value);
}

/// Samples a weight update cut off (pauseMode abort) never reach the reward or the trainer as
/// finished: they go on under the new weights (`aborted = resume`), or their groups are answered
/// with nothing and counted (`drop`; the driver counts an empty answer as filtered).
void settle_aborted(rollout_actor::stateful_pointer<rollout_state> self,
                    const std::vector<sample>& cut) {
  auto& st = self->state;
  std::set<uint64_t> dropped;
  for (const auto& s : cut) {
    if (st.calls.count(s.request_id) > 0) {
      // A service call goes on under the new weights, or is answered as cut off.
      if (st.resume_aborted) {
        st.eng->resume(s, st.calls.at(s.request_id).params);
      } else {
        answer_call(st, s);
      }
      continue;
    }
    auto it = st.groups.find(s.request_id);
    if (it == st.groups.end()) continue;
    st.aborted_samples++;
    if (st.resume_aborted) {
      st.eng->resume(s, it->second.params);
      st.resumed_samples++;
    } else {
      dropped.insert(s.request_id);
    }
  }
  for (auto id : dropped) {
    st.dropped_groups++;
    node_reply reply;
    add_abort_metrics(st, reply);
    st.groups.at(id).promise.deliver(std::move(reply));
    st.groups.erase(id);
  }
  if (st.resume_aborted && !cut.empty()) schedule_step(self);
}

/// A failed engine step answers every open group and service call with its error.
void fail_all(rollout_state& s, const std::string& what) {
  const auto error = [&] { return runtime::make_failure(errc::internal, "rollout: " + what); };
  for (auto& [id, g] : s.groups) g.promise.deliver(error());
  s.groups.clear();
  for (auto& [id, c] : s.calls) c.promise.deliver(error());
  s.calls.clear();
}

/// The generation service: one sample of the caller's ids under the engine's current version,
/// with the caller's sampling values (the model's end-of-sequence token always stops it).
caf::result<generation_result> serve_generation(rollout_actor::stateful_pointer<rollout_state> self,
                                                const generation_request& call) {
  auto& s = self->state;
  generate_request r;
  r.id = s.next_request++;
  r.prompt = call.input_ids;
  r.params = s.base;
  r.params.n = 1;
  r.params.temperature = call.temperature;
  r.params.top_p = call.top_p;
  r.params.max_new_tokens = call.max_tokens;
  r.params.stop_token_ids.insert(r.params.stop_token_ids.end(), call.stop_token_ids.begin(),
                                 call.stop_token_ids.end());
  r.params.stop_strings = call.stop;
  r.params.seed = s.base.seed * 1000003 + (uint64_t{1} << 63) + call.seed;  // apart from groups'
  try {
    if (s.eng->kv_released()) s.eng->retake_kv();
    s.eng->add(r);
  } catch (const std::exception& ex) {
    // A request the engine can never serve (std::invalid_argument) is bad input: the caller's to
    // fix (its clients get a 400).
    return runtime::to_error(ex, "rollout");
  }
  // Before the promise, which takes the request's sender over.
  caf::strong_actor_ptr requester = self->current_sender();
  auto promise = self->make_response_promise<generation_result>();
  s.calls[r.id] = {promise, r.params, std::move(requester), call.stream_id, 0};
  schedule_step(self);
  return promise;
}

/// A new weight version (port "weights"): applies the update when it carries one (else the
/// version alone changes), then pauses the engine's sequences in flight as pauseMode says.
caf::result<node_reply> apply_weights(rollout_actor::stateful_pointer<rollout_state> self,
                                      const envelope& e) {
  auto& s = self->state;
  uint64_t version =
      e.payload.match_elements<uint64_t>() ? e.payload.get_as<uint64_t>(0) : e.max_version;
  node_reply reply;
  if (e.payload.match_elements<weights::weights_update>()) {
    const auto& u = e.payload.get_as<weights::weights_update>(0);
    version = u.version;
    try {
      const timer t;
      s.receiver.apply(*s.model, u, *s.versions);
      s.model->refresh_merged();  // lora.merge: the new adapters into the base's copy
      reply.metrics["publish_apply_seconds"] = t.seconds();
    } catch (const std::exception& ex) {
      return runtime::to_error(ex, "rollout: cannot apply weights version " +
                                       std::to_string(u.version) + " (" + u.transport + ")");
    }
  }
  try {
    settle_aborted(self, s.eng->update_weights(version, s.mode));
  } catch (const std::exception& ex) {
    return runtime::to_error(ex, "rollout");
  }
  return reply;
}

/// The ids of prompt `p`: its own, or its chat messages rendered and encoded, or its text
/// encoded; throws when that needs a tokenizer the model folder lacks, or leaves no token.
std::vector<int64_t> encode_prompt(const rollout_state& s, const prompt_msg& p) {
  std::vector<int64_t> ids = p.ids;
  if (ids.empty() && !p.messages_json.empty()) {
    if (!s.codec)
      throw std::invalid_argument("chat messages need a tokenizer.json in the model folder");
    ids = s.codec->encode(s.codec->render(p.messages_json));
  } else if (ids.empty() && !p.text.empty()) {
    if (!s.codec)
      throw std::invalid_argument("text prompts need a tokenizer.json in the model folder");
    ids = s.codec->encode_prompt(p.text);
  }
  if (ids.empty())
    throw std::invalid_argument("group " + std::to_string(p.group_id) + " has an empty prompt");
  return ids;
}

/// Adds `r` to the engine, taking the KV pool back first when it was released (timed).
void add_request(rollout_state& s, const generate_request& r) {
  // Work after an idle engine starts a rollout phase: its peak GPU memory counts from here.
  if (s.eng->idle() && s.groups.empty()) llm::reset_peak_memory(s.model->device());
  if (s.eng->kv_released()) {
    const timer t;
    s.eng->retake_kv();
    s.retake_seconds = t.seconds();
  }
  s.eng->add(r);
}

/// A prompt (port "prompts"): its group's samples are asked of the engine; the answer comes when
/// they are all in.
caf::result<node_reply> take_prompt(rollout_actor::stateful_pointer<rollout_state> self,
                                    const envelope& e) {
  auto& s = self->state;
  if (!e.payload.match_elements<prompt_msg>()) {
    return caf::make_error(caf::sec::unexpected_message,
                           "rollout: port 'prompts' expects a prompt_msg");
  }
  const auto& p = e.payload.get_as<prompt_msg>(0);
  generate_request r;
  r.id = s.next_request++;
  r.params = s.base;
  r.params.seed = s.base.seed * 1000003 + p.group_id;  // each group its own streams
  try {
    r.prompt = encode_prompt(s, p);
    add_request(s, r);
  } catch (const std::exception& ex) {
    // A prompt the engine cannot serve (empty, longer than its KV cache) is bad input: the driver
    // drops it and goes on.
    return runtime::to_error(ex, "rollout");
  }
  auto promise = self->make_response_promise<node_reply>();
  s.groups[r.id] = {promise, p.group_id, p.label, {}, 0, r.params};
  schedule_step(self);
  return promise;
}

/// One engine step: the groups and calls it finished are answered, streamed calls sent their new
/// tokens; colocated, an idle engine gives its KV pool back; the next step is queued while work
/// remains.
void run_step(rollout_actor::stateful_pointer<rollout_state> self) {
  auto& s = self->state;
  s.stepping = false;
  try {
    const timer t;
    auto done = s.eng->step();
    s.busy_seconds += t.seconds();
    deliver_complete(self, done);
    send_partials(self);
    // Colocated: the rollout phase is over; the trainer's step gets the KV pool's memory.
    if (s.release_kv_when_idle && s.eng->idle() && s.groups.empty() && s.calls.empty())
      s.eng->release_kv(s.mode);
  } catch (const std::exception& ex) {
    fail_all(s, ex.what());
    return;
  }
  if (!s.eng->idle()) schedule_step(self);
}

rollout_actor::behavior_type rollout_fn(rollout_actor::stateful_pointer<rollout_state> self,
                                        std::shared_ptr<llm::decoder> model_holder,
                                        std::shared_ptr<text_codec> codec, engine_config cfg,
                                        sampling_params base, pause_mode mode, bool resume_aborted,
                                        bool release_kv_when_idle,
                                        std::shared_ptr<runtime::process_store> store,
                                        uint32_t replica) {
  auto& st = self->state;
  st.versions = store->get_or_make<weights::local_versions>();
  st.receiver.set_rank(static_cast<int>(replica) + 1);  // NCCL transports: the trainer is rank 0
  st.model = std::move(model_holder);
  st.codec = std::move(codec);
  st.eng = std::make_unique<engine>(*st.model, cfg);
  st.base = base;
  st.mode = mode;
  st.resume_aborted = resume_aborted;
  st.release_kv_when_idle = release_kv_when_idle;
  return {
      [=](process_atom, const std::string& port, const envelope& e) -> caf::result<node_reply> {
        return port == "weights" ? apply_weights(self, e) : take_prompt(self, e);
      },
      [=](serving::generate_atom, const generation_request& call) {
        return serve_generation(self, call);
      },
      [=](rstep_atom) { run_step(self); },
      [=](snapshot_atom, const std::string&) {
        // Nothing to keep: checkpoints are taken with no group in flight, and the weights are the
        // trainer's to save.
        return actor_state{};
      },
      [=](restore_atom, const std::string&, const actor_state&) { return true; },
  };
}

/// LoRA: the trainer's initial adapters (the same seed or peft folder: the engine's first version
/// is the trainer's), applied at run time or (lora.merge) merged into a copy of the base.
void attach_lora(llm::decoder& model, schema::Lora::Reader lora, const std::string& model_dir) {
  llm::attach_initial_adapters(model, lora, model_dir);
  if (lora.getMerge()) model.serve_merged(model.params().copy(model.dtype(), model.device()));
}
/// Loads the model (LoRA at run time: the process's shared base), the tokenizer (chat prompts,
/// the end-of-sequence token, stop strings) and spawns the actor on a thread of its own.
caf::actor spawn_rollout(caf::actor_system& sys, const actor_setup& s) {
  auto p = s.params_struct->as<schema::RolloutParams>();
  if (p.getModel().size() == 0)
    throw std::invalid_argument("params.rollout.model: a model folder is required");
  runtime::progress_meter loading(
      s.progress, "actor '" + s.name + "': loading " + std::string(p.getModel()), 1);
  // LoRA applied at run time leaves the base untouched: the process's one copy of it.
  const bool frozen_base = p.hasLora() && !p.getLora().getMerge();
  auto model = frozen_base
                   ? s.store->get_or_make<llm::shared_bases>()->load(std::string(p.getModel()),
                                                                     llm::to_dtype(p.getDtype()),
                                                                     llm::to_device(p.getDevice()))
                   : llm::decoder::load(std::string(p.getModel()), llm::to_dtype(p.getDtype()),
                                        llm::to_device(p.getDevice()));
  loading.update(1);
  loading.finish();
  if (p.hasLora()) attach_lora(*model, p.getLora(), std::string(p.getModel()));
  if (p.getTrueOnPolicy()) model->set_batch_invariant(true);
  engine_config cfg = engine_config_of(p, model->device().is_cuda());
  sampling_params base = sampling_of(p, s.seed, s.replica);
  const pause_mode mode = pause_mode_of(p);
  // With a tokenizer, chat prompts are rendered with the graph's chat template (or the one
  // tokenizer_config.json names) and sampling stops at the end-of-sequence token.
  auto loaded = text_codec::load(std::string(p.getModel()), std::string(p.getChatTemplate()),
                                 bos_word(p.getBos()));
  std::shared_ptr<text_codec> codec = std::move(loaded.codec);
  if (!codec && p.getChatTemplate().size() > 0) {
    throw std::invalid_argument("params.rollout.chatTemplate: " + loaded.error);
  }
  if (codec && codec->eos()) base.stop_token_ids.push_back(*codec->eos());
  if (codec)
    cfg.detokenize = [codec](const std::vector<int64_t>& ids) { return codec->decode(ids); };
  auto holder = std::shared_ptr<llm::decoder>(model.release());
  // Engine steps are heavy: the actor gets a thread of its own.
  return caf::actor_cast<caf::actor>(
      sys.spawn<caf::detached>(rollout_fn, holder, codec, cfg, base, mode,
                               p.getAborted() == schema::RolloutParams::AbortedSamples::RESUME,
                               p.getReleaseKvWhenIdle(), s.store, s.replica));
}

}  // namespace

void register_rollout_kind(runtime::kind_registry& registry) {
  kind_descriptor k;
  k.name = "rollout";
  k.summary = "samples groups of completions with the rollout engine";
  k.role = role::stage;
  k.inputs = {{"prompts", llm::port_type::prompt, "one prompt per group"},
              {"weights", weights::port_type::weights, "a new weight version from a publisher"}};
  k.outputs = {{"groups", llm::port_type::sample_group, "the samples of one prompt"}};
  k.serves = {{"generate", serving::service_type::generate,
               "ids in; output ids, log-probs and each token's weight version out"}};
  k.params_member = "rollout";
  k.check_params = check_rollout_params;
  k.graph_settings = [](capnp::DynamicStruct::Reader r) -> std::vector<graph_setting> {
    auto p = r.as<schema::RolloutParams>();
    return {{"lora", "lora", llm::lora_agreement(p.hasLora(), p.getLora())},
            {"trueOnPolicy", "trueOnPolicy", p.getTrueOnPolicy() ? "on" : "off"},
            {"temperature", "temperature", llm::temperature_agreement(p.getTemperature())}};
  };
  k.spawn = spawn_rollout;
  // A fresh engine loads the model, then the driver sends it the newest publication before any
  // prompt, and the groups its predecessor held again (they are regenerated under that version):
  // nothing of a dead engine needs keeping (see its snapshot above).
  k.restartable = true;
  registry.add(k);
  // The publisher's types (weights_update) are added by the publisher kind.
  registry.add_types(
      [](caf::actor_system_config& cfg) { cfg.add_message_types<caf::id_block::milesrt_llm>(); });
  registry.add_types([](caf::actor_system_config& cfg) {
    cfg.add_message_types<caf::id_block::milesrt_serving>();
  });
}

}  // namespace milesrt::rollout
