#include "actors/trainer/trainer_kind.hpp"

#include <caf/all.hpp>
#include <cstdio>

#include "actors/lib/eval/evaluation.hpp"
#include "actors/lib/llm/agreement.hpp"
#include "actors/lib/llm/device.hpp"
#include "actors/lib/llm/lora_params.hpp"
#include "actors/lib/llm/messages.hpp"
#include "actors/lib/llm/shared_bases.hpp"
#include "actors/lib/weights/messages.hpp"
#include "actors/trainer/trainer_batch.hpp"
#include "actors/trainer/trainer_export.hpp"
#include "actors/trainer/trainer_params.hpp"
#include "actors/trainer/trainer_ranks.hpp"
#include "actors/trainer/trainer_state.hpp"
#include "milesrt/trainer.capnp.h"
#include "runtime/core/errors.hpp"
#include "runtime/core/interfaces.hpp"
#include "runtime/core/progress.hpp"

namespace milesrt::trainer {
using eval::evaluate;
namespace {
using namespace milesrt::runtime;

/// The held-out evaluation after step `step` (every evalInterval steps): its metrics, the best
/// accuracy so far (exported when exportDir is set), and the stop after evalPatience evaluations
/// without improvement.
void run_evaluation(trainer_state& st, uint64_t step, train_reply& reply) {
  auto& ev = st.eval;
  runtime::progress_meter meter(
      ev.progress, "actor '" + st.name + "': evaluation at step " + std::to_string(step),
      ev.limit > 0 ? std::min(ev.limit, ev.records.size()) : ev.records.size());
  auto r = evaluate(st.core->model(), *st.codec, ev.records, ev.max_new_tokens, ev.limit,
                    [&meter](size_t done, size_t) { meter.update(done); });
  meter.finish();
  reply.metrics["eval_accuracy"] = r.accuracy;
  reply.metrics["eval_answer_found"] = r.answer_found;
  reply.metrics["eval_seconds"] = r.seconds;
  if (r.accuracy > st.best_accuracy) {
    st.best_accuracy = r.accuracy;
    st.best_step = step;
    st.evals_since_best = 0;
    if (!ev.export_dir.empty()) export_model(st, ev.export_dir);
  } else if (step >= ev.min_steps) {
    st.evals_since_best++;
  }
  reply.metrics["eval_best_accuracy"] = st.best_accuracy;
  if (ev.patience > 0 && st.evals_since_best >= ev.patience) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "held-out accuracy has not improved for %u evaluations (best %.4f at "
                  "step %llu%s)",
                  ev.patience, st.best_accuracy, static_cast<unsigned long long>(st.best_step),
                  ev.export_dir.empty() ? "" : ", exported");
    reply.stop = buf;
  }
}

/// Step `step` on every rank, the agreement check, then the evaluation or (without one, after
/// the last step) the export.
void train_step(trainer_state& st, uint64_t step, const std::vector<envelope>& batch,
                train_reply& reply) {
  auto seqs = to_sequences(st, batch, reply.metrics);
  std::map<std::string, double> m;
  const bool dies = ++st.steps_taken == st.fault_step;
  st.core->set_held_version(st.version);
  on_every_rank(
      st,
      [&](policy_trainer& t) {
        if (dies && t.options().group->rank() == st.fault_rank)
          throw std::runtime_error("killed by the test hook MILESRT_TEST_RANK_DIES");
        t.train(seqs);
      },
      [&] { m = st.core->train(seqs, &reply.lists); });
  check_agreement(st, step, m);
  reply.metrics.insert(m.begin(), m.end());
  st.version = step;
  const auto& ev = st.eval;
  if (ev.interval > 0 && !ev.records.empty() && st.codec && step % ev.interval == 0) {
    run_evaluation(st, step, reply);
  } else if (!ev.export_dir.empty() && ev.interval == 0 && step == st.total_steps) {
    export_model(st, ev.export_dir);
  }
}

/// A training step's answer: its metrics and the new version's weights_ref on "weights".
caf::result<train_reply> on_train(trainer_state& st, uint64_t step,
                                  const std::vector<envelope>& batch) {
  train_reply reply;
  try {
    train_step(st, step, batch, reply);
  } catch (const std::exception& e) {
    return runtime::to_error(e, "trainer '" + st.name + "', step " + std::to_string(step));
  }
  reply.version = step;
  weights::weights_ref ref;
  try {
    // Inside this answer, before the next step can change the weights: when the publisher
    // publishes copies (handover = copy), the library freezes one of this version now.
    ref = st.versions->announce(st.name, step);
  } catch (const std::exception& e) {
    return runtime::to_error(e, "trainer '" + st.name + "'");
  }
  envelope out;
  out.min_version = out.max_version = step;
  out.payload = caf::make_message(std::move(ref));
  reply.outputs.push_back({"weights", std::move(out)});
  return reply;
}

caf::result<actor_state> on_snapshot(trainer_state& st, const std::string& dir) {
  try {
    on_every_rank(
        st, [&](policy_trainer& t) { t.save(dir); }, [&] { st.core->save(dir); });
  } catch (const std::exception& e) {
    return runtime::to_error(e, "trainer '" + st.name + "'");
  }
  return actor_state{encode_state(st)};
}

caf::result<bool> on_restore(trainer_state& st, const std::string& dir, const actor_state& state) {
  if (!decode_state(st, state.bytes)) return false;
  try {
    on_every_rank(
        st, [&](policy_trainer& t) { t.load(dir); }, [&] { st.core->load(dir); });
  } catch (const std::exception& e) {
    return runtime::to_error(e, "trainer '" + st.name + "'");
  }
  try {
    // The driver sends the restored version's announcement again (to the publisher):
    // announce it here too, so that its copy exists when handover = copy.
    st.versions->announce(st.name, st.version);
  } catch (const std::exception& e) {
    return runtime::to_error(e, "trainer '" + st.name + "'");
  }
  return true;
}

learner_actor::behavior_type trainer_fn(learner_actor::stateful_pointer<trainer_state> self,
                                        std::shared_ptr<trainer_state> init) {
  self->state = std::move(*init);
  return {
      [=](train_atom, uint64_t step, const std::vector<envelope>& batch) {
        return on_train(self->state, step, batch);
      },
      [=](snapshot_atom, const std::string& dir) { return on_snapshot(self->state, dir); },
      [=](restore_atom, const std::string& dir, const actor_state& state) {
        return on_restore(self->state, dir, state);
      },
  };
}

/// Loads the model (LoRA: the process's shared base, with the initial adapters), makes the
/// state (tokenizer, evaluation, data-parallel ranks, the trainer core) and spawns the actor.
caf::actor spawn_trainer(caf::actor_system& sys, const actor_setup& s,
                         std::shared_ptr<const rl::registries> losses) {
  auto p = s.params_struct->as<schema::TrainerParams>();
  for (const auto& problem : check_trainer_params(*s.params_struct, *losses))
    throw std::invalid_argument(within("params.trainer", problem).text());
  runtime::progress_meter loading(
      s.progress, "actor '" + s.name + "': loading " + std::string(p.getModel()), 1);
  // With LoRA the base is frozen: one copy for this trainer, a LoRA engine and a reference
  // model of the same folder in this process.
  auto model = p.hasLora()
                   ? s.store->get_or_make<llm::shared_bases>()->load(std::string(p.getModel()),
                                                                     llm::to_dtype(p.getDtype()),
                                                                     llm::to_device(p.getDevice()))
                   : llm::decoder::load(std::string(p.getModel()), llm::to_dtype(p.getDtype()),
                                        llm::to_device(p.getDevice()));
  loading.update(1);
  loading.finish();
  if (p.hasLora()) {
    // The base stays frozen; only these adapters train, are checkpointed and published.
    llm::attach_initial_adapters(*model, p.getLora(), std::string(p.getModel()));
  }
  if (p.getTrueOnPolicy()) model->set_batch_invariant(true);
  auto o = options_of(p, s.steps);
  auto init = std::make_shared<trainer_state>();
  init->name = s.name;
  init->versions = s.store->get_or_make<weights::local_versions>();
  init->source_dir = std::string(p.getModel());
  init->total_steps = s.steps;
  init->logprob_alarm = p.getLogprobDiffAlarm();
  init->true_on_policy = p.getTrueOnPolicy();
  auto codec = llm::text_codec::load(std::string(p.getModel()), std::string(p.getChatTemplate()));
  init->codec = std::move(codec.codec);
  const std::string tok_error = codec.error;
  if (o.objective == "sft" && !init->codec) {
    throw std::invalid_argument("params.trainer.objective sft needs a tokenizer: " + tok_error);
  }
  init->eval.interval = p.getEvalInterval();
  init->eval.patience = p.getEvalPatience();
  init->eval.min_steps = p.getEvalMinSteps();
  init->eval.max_new_tokens = p.getEvalMaxNewTokens();
  init->eval.limit = p.getEvalLimit();
  init->eval.export_dir = std::string(p.getExportDir());
  init->eval.progress = s.progress;
  if (p.getEvalData().size() > 0)
    init->eval.records = tasks::load_jsonl(std::string(p.getEvalData()));
  if (init->eval.interval > 0 && !init->codec) {
    throw std::invalid_argument("params.trainer.evalInterval needs a tokenizer: " + tok_error);
  }
  if (p.getDataParallel() > 1) {
    read_rank_fault(*init);
    init->ranks = start_ranks(p, o, losses);
    o.group = &init->ranks->group();
  }
  init->core = std::make_unique<policy_trainer>(std::move(model), o, *losses);
  // A colocated publisher (and engine) in this process reads the weights from here.
  // With LoRA that is the adapters alone.
  init->versions->add_trainer(s.name, init->core->model().shared_published());
  return caf::actor_cast<caf::actor>(sys.spawn<caf::detached>(trainer_fn, init));
}

}  // namespace

void register_trainer_kind(kind_registry& registry) {
  register_trainer_kind(registry, std::make_shared<const rl::registries>(rl::builtin_registries()));
}

void register_trainer_kind(kind_registry& registry, std::shared_ptr<const rl::registries> losses) {
  kind_descriptor k;
  k.name = "trainer";
  k.summary = "trains the policy: GRPO-family / PPO losses on scored groups, or SFT on prompts";
  k.role = role::learner;
  k.inputs = {{"batches", llm::port_type::scored_group, "scored sample groups (RL)"},
              {"sft", llm::port_type::prompt, "prompts with a response (SFT)"}};
  k.outputs = {
      {"weights", weights::port_type::trained_weights, "where the new version's weights are"}};
  k.params_member = "trainer";
  k.check_params = [losses](capnp::DynamicStruct::Reader r) {
    return check_trainer_params(r, *losses);
  };
  k.graph_settings = [](capnp::DynamicStruct::Reader r) -> std::vector<graph_setting> {
    auto p = r.as<schema::TrainerParams>();
    return {{"lora", "lora", llm::lora_agreement(p.hasLora(), p.getLora())},
            {"trueOnPolicy", "trueOnPolicy", p.getTrueOnPolicy() ? "on" : "off"},
            {"temperature", "temperature", llm::temperature_agreement(p.getTemperature())}};
  };
  k.check_in_graph = check_in_graph;
  k.spawn = [losses](caf::actor_system& sys, const actor_setup& s) {
    return spawn_trainer(sys, s, losses);
  };
  registry.add(k);
}

}  // namespace milesrt::trainer
