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
#include "actors/lib/llm/model_ref.hpp"
#include "actors/lib/llm/shared_bases.hpp"
#include "actors/lib/llm/text_codec.hpp"
#include "actors/lib/serving/engine.hpp"
#include "actors/lib/serving/generate_messages.hpp"
#include "actors/lib/weights/apply.hpp"
#include "actors/lib/weights/local_versions.hpp"
#include "actors/lib/weights/messages.hpp"
#include "milesrt/rollout.capnp.h"
#include "runtime/core/interfaces.hpp"
#include "runtime/core/progress.hpp"

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

using rstep_atom = caf::atom_constant<caf::atom("rstep")>;

/// The stage interface plus the engine's own step messages and the generation service
/// (serving/generate_messages.hpp) it serves on its `generate` port.
using rollout_actor = stage_actor::extend<
    caf::reacts_to<rstep_atom>,
    caf::replies_to<serving::generate_atom, generation_request>::with<generation_result>>;

struct pending_group {
  caf::typed_response_promise<node_reply> promise;
  uint64_t group_id = 0;
  std::string label;
  /// By sample index, whatever order they finish in (that order depends on the engine's batches,
  /// so on when prompts arrived: on timing); `received` of them are in.
  std::vector<sample_msg> samples;
  int64_t received = 0;
  sampling_params params;  ///< what its samples were asked with (a resumed sample goes on with it)
};

/// A request of the generation service: the caller's answer, and what it is sampled with.
struct pending_call {
  caf::typed_response_promise<generation_result> promise;
  sampling_params params;
  /// Streaming: the requester, its stream id (0: none) and the tokens it has been sent.
  caf::strong_actor_ptr to;
  uint64_t stream_id = 0;
  size_t sent = 0;
};

struct rollout_state {
  std::shared_ptr<llm::decoder> model;
  std::shared_ptr<text_codec> codec;  ///< null without tokenizer.json: prompts must be ids
  std::unique_ptr<engine> eng;
  sampling_params base;
  pause_mode mode = pause_mode::retract;
  bool resume_aborted =
      false;  ///< pauseMode abort: resume the samples cut off, or drop their groups
  /// Totals since the start (reported in abort mode): samples an update cut off, groups dropped
  /// for it, samples resumed.
  uint64_t aborted_samples = 0, dropped_groups = 0, resumed_samples = 0;
  std::map<uint64_t, pending_group> groups;  // engine request id -> group
  /// Requests of the generation service by engine request id.
  std::map<uint64_t, pending_call> calls;
  std::shared_ptr<weights::local_versions>
      versions;                ///< this process's trainers (colocated publishing)
  weights::receiver receiver;  ///< what this engine holds of the published versions
  uint64_t next_request = 1;
  bool stepping = false;
  double busy_seconds = 0;            ///< time spent in engine steps since the start
  bool release_kv_when_idle = false;  ///< colocated: the KV pool goes back between rollout phases
  double retake_seconds = -1;         ///< the last retake of the KV pool (and its graphs), if any
};

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
  const auto error = [&] { return caf::make_error(caf::sec::runtime_error, "rollout: " + what); };
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
  } catch (const std::invalid_argument& ex) {
    // A request the engine can never serve: the caller's to fix (its clients get a 400).
    return caf::make_error(caf::sec::invalid_argument, std::string("rollout: ") + ex.what());
  } catch (const std::exception& ex) {
    return caf::make_error(caf::sec::runtime_error, std::string("rollout: ") + ex.what());
  }
  // Before the promise, which takes the request's sender over.
  caf::strong_actor_ptr requester = self->current_sender();
  auto promise = self->make_response_promise<generation_result>();
  s.calls[r.id] = {promise, r.params, std::move(requester), call.stream_id, 0};
  schedule_step(self);
  return promise;
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
        auto& s = self->state;
        if (port == "weights") {
          uint64_t version =
              e.payload.match_elements<uint64_t>() ? e.payload.get_as<uint64_t>(0) : e.max_version;
          node_reply reply;
          if (e.payload.match_elements<weights::weights_update>()) {
            const auto& u = e.payload.get_as<weights::weights_update>(0);
            version = u.version;
            try {
              auto t0 = std::chrono::steady_clock::now();
              s.receiver.apply(*s.model, u, *s.versions);
              s.model->refresh_merged();  // lora.merge: the new adapters into the base's copy
              reply.metrics["publish_apply_seconds"] =
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            } catch (const std::exception& ex) {
              return caf::make_error(caf::sec::runtime_error,
                                     "rollout: cannot apply weights version " +
                                         std::to_string(u.version) + " (" + u.transport +
                                         "): " + ex.what());
            }
          }
          try {
            settle_aborted(self, s.eng->update_weights(version, s.mode));
          } catch (const std::exception& ex) {
            return caf::make_error(caf::sec::runtime_error, std::string("rollout: ") + ex.what());
          }
          return reply;
        }
        if (!e.payload.match_elements<prompt_msg>()) {
          return caf::make_error(caf::sec::unexpected_message,
                                 "rollout: port 'prompts' expects a prompt_msg");
        }
        const auto& p = e.payload.get_as<prompt_msg>(0);
        generate_request r;
        r.id = s.next_request++;
        r.prompt = p.ids;
        r.params = s.base;
        r.params.seed = s.base.seed * 1000003 + p.group_id;  // each group its own streams
        try {
          if (r.prompt.empty() && !p.messages_json.empty()) {
            if (!s.codec)
              throw std::invalid_argument(
                  "chat messages need a tokenizer.json in the model folder");
            r.prompt = s.codec->encode(s.codec->render(p.messages_json));
          } else if (r.prompt.empty() && !p.text.empty()) {
            if (!s.codec)
              throw std::invalid_argument("text prompts need a tokenizer.json in the model folder");
            r.prompt = s.codec->encode_prompt(p.text);
          }
          if (r.prompt.empty())
            throw std::invalid_argument("group " + std::to_string(p.group_id) +
                                        " has an empty prompt");
          // Work after an idle engine starts a rollout phase: its peak GPU memory counts from here.
          if (s.eng->idle() && s.groups.empty()) llm::reset_peak_memory(s.model->device());
          if (s.eng->kv_released()) {
            auto t0 = std::chrono::steady_clock::now();
            s.eng->retake_kv();
            s.retake_seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          }
          s.eng->add(r);
        } catch (const std::exception& ex) {
          return caf::make_error(caf::sec::runtime_error, std::string("rollout: ") + ex.what());
        }
        auto promise = self->make_response_promise<node_reply>();
        s.groups[r.id] = {promise, p.group_id, p.label, {}, 0, r.params};
        schedule_step(self);
        return promise;
      },
      [=](serving::generate_atom, const generation_request& call) {
        return serve_generation(self, call);
      },
      [=](rstep_atom) {
        auto& s = self->state;
        s.stepping = false;
        try {
          auto t0 = std::chrono::steady_clock::now();
          auto done = s.eng->step();
          s.busy_seconds +=
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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
      },
      [=](snapshot_atom, const std::string&) {
        // Nothing to keep: checkpoints are taken with no group in flight, and the weights are the
        // trainer's to save.
        return actor_state{};
      },
      [=](restore_atom, const std::string&, const actor_state&) { return true; },
  };
}

/// The text_codec's word for the params' BOS policy.
std::string bos_word(schema::RolloutParams::BosPolicy b) {
  switch (b) {
    case schema::RolloutParams::BosPolicy::CONFIG:
      return "config";
    case schema::RolloutParams::BosPolicy::NEVER:
      return "never";
    default:
      return "auto";
  }
}

}  // namespace

namespace {
// The model folder, as far as validation can see it (llm::model_folder_problem: the config within
// the limits, the weights' headers and shapes), and (on the CPU, with a fixed block count) that the
// KV cache fits the machine's memory (docs/limits.md). The weights' values are read when the actor
// starts.
void check_model(capnp::DynamicStruct::Reader reader, std::vector<std::string>& problems) {
  auto p = reader.as<schema::RolloutParams>();
  llm::model_config c;
  bool read = false;
  for (auto& e :
       llm::model_ref_problems(llm::model_ref_of(reader), llm::model_use::weights, &c, &read))
    problems.push_back(e);
  if (!read) return;
  const double memory = llm::physical_memory_bytes();
  const double bytes = llm::kv_cache_bytes(c, p.getKvBlocks(), p.getBlockSize(),
                                           double(c10::elementSize(llm::to_dtype(p.getDtype()))));
  if (p.getDevice() == schema::Device::CPU && memory > 0 && bytes > memory) {
    char line[160];
    std::snprintf(line, sizeof line, "%.1f GiB of KV cache exceed the machine's memory (%.1f GiB)",
                  bytes / double(1ull << 30), memory / double(1ull << 30));
    problems.push_back("kvBlocks: " + std::to_string(p.getKvBlocks()) + " blocks of " +
                       std::to_string(p.getBlockSize()) + " tokens: " + line);
  }
}
/// LoRA: the trainer's initial adapters (the same seed or peft folder: the engine's first version
/// is the trainer's), applied at run time or (lora.merge) merged into a copy of the base.
void attach_lora(llm::decoder& model, schema::Lora::Reader lora, const std::string& model_dir) {
  llm::attach_initial_adapters(model, lora, model_dir);
  if (lora.getMerge()) model.serve_merged(model.params().copy(model.dtype(), model.device()));
}
/// Checks of the params beyond their types, the model folder and the LoRA section.
std::vector<std::string> check_rollout_params(capnp::DynamicStruct::Reader reader) {
  auto p = reader.as<schema::RolloutParams>();
  std::vector<std::string> problems;
  if (p.getKvBlocks() == 0) problems.push_back("kvBlocks: must be at least 1");
  if (p.getBlockSize() == 0) problems.push_back("blockSize: must be at least 1");
  if (p.getStepTokens() == 0) problems.push_back("stepTokens: must be at least 1");
  if (!(p.getKvMemoryFraction() >= 0 && p.getKvMemoryFraction() <= 1))
    problems.push_back("kvMemoryFraction: must be in [0, 1]");
  using limits = serving::request_limits;
  if (p.getSamplesPerPrompt() == 0 || p.getSamplesPerPrompt() > limits::max_n) {
    problems.push_back("samplesPerPrompt: must be from 1 to " + std::to_string(limits::max_n) +
                       ", got " + std::to_string(p.getSamplesPerPrompt()));
  }
  if (p.getMaxNewTokens() == 0 || p.getMaxNewTokens() > limits::max_new_tokens) {
    problems.push_back("maxNewTokens: must be from 1 to " + std::to_string(limits::max_new_tokens) +
                       ", got " + std::to_string(p.getMaxNewTokens()));
  }
  if (!(p.getTemperature() > 0)) {
    problems.push_back("temperature: must be > 0");
  } else if (!(p.getTemperature() >= limits::min_temperature &&
               p.getTemperature() <= limits::max_temperature)) {
    problems.push_back("temperature: must be from 1e-05 to 100000");
  }
  check_model(reader, problems);
  if (p.hasLora()) {
    for (auto& problem : llm::lora_params_problems(p.getLora(), p.getModel()))
      problems.push_back(problem);
  }
  if (!(p.getTopP() > 0 && p.getTopP() <= 1)) problems.push_back("topP: must be in (0, 1]");
  if (p.getTrueOnPolicy()) {
    if (auto problem = llm::true_on_policy_problem(p.getDevice(), p.getDtype(), p.hasLora());
        !problem.empty())
      problems.push_back(problem);
    if (p.hasLora() && p.getLora().getMerge())
      problems.push_back(
          "trueOnPolicy: lora.merge serves a merged copy of the base, whose "
          "log-probs differ from the trainer's unmerged ones in their last bits");
  }
  if (p.getAborted() == schema::RolloutParams::AbortedSamples::RESUME &&
      p.getPauseMode() != schema::RolloutParams::PauseMode::ABORT) {
    problems.push_back(
        "aborted: resume applies to pauseMode = abort (no other mode cuts samples off)");
  }
  return problems;
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
  k.spawn = [](caf::actor_system& sys, const actor_setup& s) -> caf::actor {
    auto p = s.params_struct->as<schema::RolloutParams>();
    if (p.getModel().size() == 0)
      throw std::invalid_argument("params.rollout.model: a model folder is required");
    runtime::progress_meter loading(
        s.progress, "actor '" + s.name + "': loading " + std::string(p.getModel()), 1);
    // LoRA applied at run time leaves the base untouched: the process's one copy of it.
    const bool frozen_base = p.hasLora() && !p.getLora().getMerge();
    auto model =
        frozen_base ? s.store->get_or_make<llm::shared_bases>()->load(std::string(p.getModel()),
                                                                      llm::to_dtype(p.getDtype()),
                                                                      llm::to_device(p.getDevice()))
                    : llm::decoder::load(std::string(p.getModel()), llm::to_dtype(p.getDtype()),
                                         llm::to_device(p.getDevice()));
    loading.update(1);
    loading.finish();
    if (p.hasLora()) attach_lora(*model, p.getLora(), std::string(p.getModel()));
    if (p.getTrueOnPolicy()) model->set_batch_invariant(true);
    engine_config cfg;
    cfg.num_blocks = p.getKvBlocks();
    cfg.block_size = p.getBlockSize();
    cfg.max_tokens_per_step = p.getStepTokens();
    cfg.kv_memory_fraction = p.getKvMemoryFraction();
    // On the CPU the engine keeps its earlier cap of 64 running sequences (the main job's timing);
    // on the GPU only the KV budget bounds them.
    if (!model->device().is_cuda()) cfg.max_running = 64;
    sampling_params base;
    base.n = p.getSamplesPerPrompt();
    base.max_new_tokens = p.getMaxNewTokens();
    base.temperature = p.getTemperature();
    base.top_p = p.getTopP();
    base.top_k = p.getTopK();
    base.seed = p.getSeed() + s.seed * 7919 + s.replica;
    pause_mode mode =
        p.getPauseMode() == schema::RolloutParams::PauseMode::ABORT      ? pause_mode::abort
        : p.getPauseMode() == schema::RolloutParams::PauseMode::IN_PLACE ? pause_mode::in_place
                                                                         : pause_mode::retract;
    // With a tokenizer, chat prompts are rendered with the graph's chat template (or the one
    // tokenizer_config.json names) and sampling stops at the end-of-sequence token.
    std::string tok_error;
    std::shared_ptr<text_codec> codec =
        text_codec::load(std::string(p.getModel()), std::string(p.getChatTemplate()), tok_error,
                         bos_word(p.getBos()));
    if (!codec && p.getChatTemplate().size() > 0) {
      throw std::invalid_argument("params.rollout.chatTemplate: " + tok_error);
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
  };
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
