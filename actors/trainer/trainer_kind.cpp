#include "actors/trainer/trainer_kind.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <caf/all.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "actors/lib/dist/nccl_collectives.hpp"
#include "actors/lib/dist/rendezvous.hpp"
#include "actors/lib/eval/evaluation.hpp"
#include "actors/lib/llm/agreement.hpp"
#include "actors/lib/llm/device.hpp"
#include "actors/lib/llm/lora_params.hpp"
#include "actors/lib/llm/messages.hpp"
#include "actors/lib/llm/model_folder.hpp"
#include "actors/lib/llm/model_ref.hpp"
#include "actors/lib/llm/peft_io.hpp"
#include "actors/lib/llm/shared_bases.hpp"
#include "actors/lib/llm/text_codec.hpp"
#include "actors/lib/tasks/jsonl_dataset.hpp"
#include "actors/lib/weights/local_versions.hpp"
#include "actors/lib/weights/messages.hpp"
#include "actors/trainer/rank_pool.hpp"
#include "actors/trainer/trainer_core.hpp"
#include "milesrt/trainer.capnp.h"
#include "runtime/core/interfaces.hpp"
#include "runtime/core/progress.hpp"
#include "runtime/core/user_file.hpp"

namespace milesrt::trainer {
using eval::evaluate;
using namespace milesrt::rl;  // losses, estimators, AdamW
namespace {
using namespace milesrt::runtime;
namespace fs = std::filesystem;

struct eval_settings {
  std::vector<tasks::data_record> records;
  uint32_t interval = 0, patience = 0, min_steps = 0;
  int64_t max_new_tokens = 16;
  size_t limit = 0;
  fs::path export_dir;
  std::FILE* progress = nullptr;  ///< where evaluations report progress (null: none)
};

struct trainer_state {
  /// dataParallel > 1: ranks 1 .. N-1 (rank 0 is `core`, this actor's own). Declared before
  /// `core`, whose options point at the pool's group: the trainer goes first.
  std::unique_ptr<rank_pool> ranks;
  std::unique_ptr<policy_trainer> core;
  fs::path source_dir;  ///< the model folder training started from (its tokenizer files)
  std::shared_ptr<llm::text_codec> codec;
  std::string name;
  /// This process's weights registry: the publisher and colocated engines read the versions
  /// this trainer announces there.
  std::shared_ptr<weights::local_versions> versions;
  uint64_t version = 0;
  uint64_t total_steps = 0;
  eval_settings eval;
  double best_accuracy = -1;
  uint64_t best_step = 0;
  uint32_t evals_since_best = 0;
  /// Tests only (MILESRT_TEST_RANK_DIES=R:S, docs/testing.md): rank R throws in the S-th step
  /// this trainer takes in its process (a count that starts again after a resume); 0: never.
  int fault_rank = 0;
  uint64_t fault_step = 0;
  uint64_t steps_taken = 0;
  /// Train/rollout agreement: the alarm's threshold (0: off), the trueOnPolicy mode, and the
  /// alarms raised since this trainer started.
  double logprob_alarm = 0;
  bool true_on_policy = false;
  uint64_t alarms = 0;
};

/// After a step: in the trueOnPolicy mode any difference between the engine's and the trainer's
/// log-probs of the tokens sampled under the weights the trainer held is an error; outside it, a
/// difference above the alarm's threshold is a warning line and counted.
void check_agreement(trainer_state& st, uint64_t step, std::map<std::string, double>& m) {
  const auto it = m.find("train_rollout_logprob_abs_diff_max_held");
  if (it == m.end()) return;  // no sequence of the held version in this batch (or SFT)
  const double diff = it->second;
  char shown[32];
  std::snprintf(shown, sizeof shown, "%.3g", diff);
  if (st.true_on_policy) {
    if (diff != 0)
      throw std::runtime_error(
          std::string("trueOnPolicy: the trainer's log-probs of the tokens sampled under the "
                      "weights it holds (version ") +
          std::to_string(st.version) + ") differ from the engine's by up to " + shown +
          " (must be 0)");
    return;
  }
  if (st.logprob_alarm <= 0) return;
  const bool alarm = diff > st.logprob_alarm;
  m["logprob_diff_alarm"] = alarm ? 1.0 : 0.0;
  if (alarm) {
    ++st.alarms;
    std::fprintf(stderr,
                 "milesrt: warning: trainer '%s', step %llu: the trainer's log-probs of tokens "
                 "sampled under the weights it holds differ from the engine's by up to %s, above "
                 "logprobDiffAlarm (%g)\n",
                 st.name.c_str(), static_cast<unsigned long long>(step), shown, st.logprob_alarm);
  }
  m["logprob_diff_alarms"] = static_cast<double>(st.alarms);
}

/// Reads MILESRT_TEST_RANK_DIES ("R:S", R >= 1) into `st`, the one place it is read.
void read_rank_fault(trainer_state& st) {
  const char* v = std::getenv("MILESRT_TEST_RANK_DIES");
  if (!v) return;
  int rank = 0;
  unsigned long long step = 0;
  char end = 0;
  if (std::sscanf(v, "%d:%llu%c", &rank, &step, &end) != 2 || rank < 1 || step == 0)
    throw std::invalid_argument(std::string("MILESRT_TEST_RANK_DIES: expected RANK:STEP (rank "
                                            "from 1, step from 1), got '") +
                                v + "'");
  st.fault_rank = rank;
  st.fault_step = step;
}

/// Writes the model as a complete Hugging Face folder: weights and config, and the tokenizer
/// files of the folder training started from. With LoRA the weights are the base with the
/// adapters merged in (a model any reader loads).
void export_model(const trainer_state& st, const fs::path& dir) {
  const auto& model = st.core->model();
  if (const auto* lora = model.lora()) {
    // The adapters alone in peft's format, in a folder of their own: a model folder holding an
    // adapter_config.json would be read by transformers as base + adapter (applied twice).
    llm::save_peft_adapter(dir / "adapter", model.config(), *lora, *model.adapters(),
                           fs::absolute(st.source_dir).string());
    auto merged = llm::merge_adapters(model.params(), model.config(), *lora, *model.adapters());
    model.save(dir, 5ull << 30, merged.get());
  } else {
    model.save(dir);
  }
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                        "generation_config.json", "chat_template.jinja"}) {
    if (fs::exists(st.source_dir / f)) {
      fs::copy_file(st.source_dir / f, dir / f, fs::copy_options::overwrite_existing);
    }
  }
}

/// The actor's small state for checkpoints (the model and optimizer go to files).
std::vector<uint8_t> encode_state(const trainer_state& st) {
  std::ostringstream out;
  out.precision(17);
  out << "trainer-state 1 " << st.version << ' ' << st.best_accuracy << ' ' << st.best_step << ' '
      << st.evals_since_best;
  auto s = out.str();
  return {s.begin(), s.end()};
}

bool decode_state(trainer_state& st, const std::vector<uint8_t>& bytes) {
  std::istringstream in(std::string(bytes.begin(), bytes.end()));
  std::string tag;
  int format = 0;
  in >> tag >> format >> st.version >> st.best_accuracy >> st.best_step >> st.evals_since_best;
  return tag == "trainer-state" && format == 1 && !in.fail();
}

std::vector<int64_t> tokenize_prompt(const trainer_state& st, const llm::prompt_msg& p) {
  if (!p.ids.empty()) return p.ids;
  if (!st.codec)
    throw std::invalid_argument("SFT items need a tokenizer.json in the trainer's model folder");
  if (!p.messages_json.empty()) return st.codec->encode(st.codec->render(p.messages_json));
  return st.codec->encode(p.text);
}

/// The batch's items as training sequences: scored groups (RL) or prompts with a response (SFT).
std::vector<train_sequence> to_sequences(const trainer_state& st,
                                         const std::vector<envelope>& batch,
                                         std::map<std::string, double>& metrics) {
  std::vector<train_sequence> out;
  double correct = 0, samples = 0, truncated = 0;
  for (size_t g = 0; g < batch.size(); ++g) {
    const auto& payload = batch[g].payload;
    if (payload.match_elements<llm::sample_group>()) {
      const auto& group = payload.get_as<llm::sample_group>(0);
      for (const auto& s : group.samples) {
        train_sequence t;
        t.prompt = s.prompt;
        t.output = s.output;
        t.rollout_logprobs = s.logprobs;
        t.versions = s.versions;
        t.ref_logprobs = s.ref_logprobs;
        t.values = s.values;
        t.experts = s.experts;
        t.mask = s.mask;
        t.reward = s.reward;
        t.group = static_cast<int64_t>(g);
        out.push_back(std::move(t));
        samples += 1;
        truncated += s.finish_reason == "length" ? 1 : 0;
      }
    } else if (payload.match_elements<llm::prompt_msg>()) {
      const auto& p = payload.get_as<llm::prompt_msg>(0);
      if (p.response.empty()) {
        throw std::invalid_argument("SFT item of group " + std::to_string(p.group_id) +
                                    " has no response");
      }
      train_sequence t;
      t.prompt = tokenize_prompt(st, p);
      t.output = st.codec->encode(p.response);
      if (auto eos = st.codec->eos()) t.output.push_back(*eos);
      t.group = static_cast<int64_t>(g);
      out.push_back(std::move(t));
    } else {
      throw std::invalid_argument("item " + std::to_string(batch[g].origin) +
                                  " is neither a scored group nor a prompt: " + to_string(payload));
    }
  }
  (void)correct;
  // Responses cut at the rollout's maxNewTokens rather than ended by the model.
  if (samples > 0) metrics["response_truncated_frac"] = truncated / samples;
  return out;
}

/// Runs `own` on this actor's trainer (rank 0) and, with data parallelism, `job` on every other
/// rank's at the same time (each rank one intra-op thread).
void on_every_rank(trainer_state& st, const std::function<void(policy_trainer&)>& job,
                   const std::function<void()>& own) {
  if (!st.ranks) return own();
  at::set_num_threads(1);
  st.ranks->run(job, own);
}

learner_actor::behavior_type trainer_fn(learner_actor::stateful_pointer<trainer_state> self,
                                        std::shared_ptr<trainer_state> init) {
  self->state = std::move(*init);
  return {
      [=](train_atom, uint64_t step,
          const std::vector<envelope>& batch) -> caf::result<train_reply> {
        auto& st = self->state;
        train_reply reply;
        try {
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
          auto& ev = st.eval;
          if (ev.interval > 0 && !ev.records.empty() && st.codec && step % ev.interval == 0) {
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
                            ev.patience, st.best_accuracy,
                            static_cast<unsigned long long>(st.best_step),
                            ev.export_dir.empty() ? "" : ", exported");
              reply.stop = buf;
            }
          } else if (!ev.export_dir.empty() && ev.interval == 0 && step == st.total_steps) {
            export_model(st, ev.export_dir);
          }
        } catch (const std::exception& e) {
          return caf::make_error(
              caf::sec::runtime_error,
              "trainer '" + st.name + "', step " + std::to_string(step) + ": " + e.what());
        }
        reply.version = step;
        weights::weights_ref ref;
        try {
          // Inside this answer, before the next step can change the weights: when the publisher
          // publishes copies (handover = copy), the library freezes one of this version now.
          ref = st.versions->announce(st.name, step);
        } catch (const std::exception& e) {
          return caf::make_error(caf::sec::runtime_error, e.what());
        }
        envelope out;
        out.min_version = out.max_version = step;
        out.payload = caf::make_message(std::move(ref));
        reply.outputs.push_back({"weights", std::move(out)});
        return reply;
      },
      [=](snapshot_atom, const std::string& dir) -> caf::result<actor_state> {
        auto& st = self->state;
        try {
          on_every_rank(
              st, [&](policy_trainer& t) { t.save(dir); }, [&] { st.core->save(dir); });
        } catch (const std::exception& e) {
          return caf::make_error(caf::sec::runtime_error, "trainer '" + st.name + "': " + e.what());
        }
        return actor_state{encode_state(st)};
      },
      [=](restore_atom, const std::string& dir, const actor_state& state) -> caf::result<bool> {
        auto& st = self->state;
        if (!decode_state(st, state.bytes)) return false;
        try {
          on_every_rank(
              st, [&](policy_trainer& t) { t.load(dir); }, [&] { st.core->load(dir); });
        } catch (const std::exception& e) {
          return caf::make_error(caf::sec::runtime_error, "trainer '" + st.name + "': " + e.what());
        }
        try {
          // The driver sends the restored version's announcement again (to the publisher):
          // announce it here too, so that its copy exists when handover = copy.
          st.versions->announce(st.name, st.version);
        } catch (const std::exception& e) {
          return caf::make_error(caf::sec::runtime_error, e.what());
        }
        return true;
      },
  };
}

using Params = schema::TrainerParams;

// The schema's enums as the RL library's (the schema is the graph file's word, the library's the
// maths').
aggregation to_aggregation(Params::Aggregation a) {
  switch (a) {
    case Params::Aggregation::TOKEN_MEAN:
      return aggregation::token_mean;
    case Params::Aggregation::SEQ_MEAN_TOKEN_SUM:
      return aggregation::seq_mean_token_sum;
    case Params::Aggregation::SEQ_MEAN_TOKEN_MEAN:
      return aggregation::seq_mean_token_mean;
    case Params::Aggregation::CONSTANT:
      return aggregation::constant;
  }
  throw std::invalid_argument("aggregation: unknown enumerant " +
                              std::to_string(static_cast<int>(a)));
}

kl_estimator to_kl(Params::KlType k) {
  switch (k) {
    case Params::KlType::NONE:
      return kl_estimator::none;
    case Params::KlType::K1:
      return kl_estimator::k1;
    case Params::KlType::K2:
      return kl_estimator::k2;
    case Params::KlType::K3:
      return kl_estimator::k3;
  }
  throw std::invalid_argument("klType: unknown enumerant " + std::to_string(static_cast<int>(k)));
}

mis_level to_mis(Params::Mis m) {
  switch (m) {
    case Params::Mis::NONE:
      return mis_level::none;
    case Params::Mis::TOKEN:
      return mis_level::token;
    case Params::Mis::SEQUENCE:
      return mis_level::sequence;
  }
  throw std::invalid_argument("mis: unknown enumerant " + std::to_string(static_cast<int>(m)));
}

/// The trainer core's options from the graph's params (`steps`: the run's training steps).
trainer_options options_of(Params::Reader p, uint64_t steps) {
  trainer_options o;
  if (p.hasLora()) o.base_model = p.getModel();
  o.objective = p.getObjective() == Params::Objective::SFT ? "sft" : "rl";
  o.estimator = p.getEstimator();
  o.advantages.gamma = p.getGamma();
  o.advantages.lambda = p.getLambda();
  o.loss.eps_clip = p.getEpsClip();
  o.loss.eps_clip_high = p.getEpsClipHigh() > 0 ? p.getEpsClipHigh() : p.getEpsClip();
  o.loss.dual_clip_c = p.getDualClipC();
  o.policy_loss = p.getPolicyLoss();
  o.loss.agg = to_aggregation(p.getAggregation());
  o.loss.constant_normalizer = p.getConstantNormalizer();
  o.loss.kl = to_kl(p.getKlType());
  o.kl_in_reward = p.getKlInReward();
  // KL as a reward penalty takes the coefficient away from the loss term.
  o.loss.kl_coef = o.kl_in_reward ? 0.0 : p.getKlCoef();
  o.kl_reward_coef = o.kl_in_reward ? p.getKlCoef() : 0.0;
  o.loss.entropy_coef = p.getEntropyCoef();
  o.loss.tis = p.getTis();
  o.loss.tis_low = p.getTisLow();
  o.loss.tis_high = p.getTisHigh();
  o.loss.mis = to_mis(p.getMis());
  o.loss.mis_low = p.getMisLow();
  o.loss.mis_high = p.getMisHigh();
  o.loss.distill_coef = p.getDistillCoef();
  o.use_rollout_logprobs = p.getUseRolloutLogprobs();
  o.routing_replay = p.getRoutingReplay();
  o.temperature = p.getTemperature();
  o.optimizer.lr = p.getLr();
  o.optimizer.weight_decay = p.getWeightDecay();
  o.optimizer.beta1 = p.getBeta1();
  o.optimizer.beta2 = p.getBeta2();
  o.optimizer.eps = p.getAdamEps();
  o.optimizer.grad_clip = p.getGradClip();
  o.optimizer.warmup_steps = p.getWarmupSteps();
  o.optimizer.schedule = p.getLrSchedule() == Params::LrSchedule::COSINE ? "cosine" : "constant";
  o.optimizer.min_lr = p.getMinLr();
  o.optimizer.total_steps = steps * std::max<uint32_t>(1, p.getUpdatesPerStep());
  o.micro_batch_tokens = p.getMicroBatchTokens();
  o.updates_per_step = std::max<uint32_t>(1, p.getUpdatesPerStep());
  o.activation_checkpointing = p.getActivationCheckpointing();
  o.checkpoint_layers = p.getCheckpointLayers();
  o.shard_optimizer = p.getShardOptimizer();
  return o;
}

/// Ranks 1 .. dataParallel-1 of a data-parallel trainer, each with its own copy of the model,
/// joined with this thread as rank 0 (the store on storeHost:storePort, a free port when 0).
std::unique_ptr<rank_pool> start_ranks(Params::Reader p, const trainer_options& o,
                                       std::shared_ptr<const rl::registries> losses) {
  dist::group_options g;
  g.host = p.getStoreHost();
  g.port = p.getStorePort() != 0 ? p.getStorePort() : dist::pick_free_port(g.host);
  g.world_size = static_cast<int>(p.getDataParallel());
  g.join_timeout = g.op_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(p.getRankTimeoutSeconds() * 1000));
  const std::string path = p.getModel();
  const auto dtype = llm::to_dtype(p.getDtype());
  const auto device = llm::to_device(p.getDevice());
  auto make = [o, path, dtype, device, losses](int rank, dist::collectives& group) {
    auto mine = o;
    mine.group = &group;
    return std::make_unique<policy_trainer>(
        llm::decoder::load(path, dtype, rank_pool::device_of(device, rank)), mine, *losses);
  };
  try {
    return std::make_unique<rank_pool>(g, make, device);
  } catch (const std::exception& e) {
    throw std::runtime_error("params.trainer.dataParallel: the " + std::to_string(g.world_size) +
                             " ranks did not form a group: " + e.what());
  }
}

/// The data-parallel params: at least one rank, NCCL in the build for GPUs, not with LoRA, a free
/// port.
void check_data_parallel(Params::Reader p, const std::function<void(const std::string&)>& bad) {
  const uint32_t n = p.getDataParallel();
  if (n == 0) bad("dataParallel: must be at least 1 (the number of trainer ranks)");
  if (!(p.getRankTimeoutSeconds() > 0)) bad("rankTimeoutSeconds: must be > 0");
  if (n <= 1) return;
  if (p.getDevice() != schema::Device::CPU && !dist::nccl_available())
    bad("dataParallel: " + std::to_string(n) +
        " ranks on cuda need the NCCL backend, which this build lacks (built without CUDA or "
        "NCCL): use device = cpu");
  if (p.hasLora()) bad("dataParallel: " + std::to_string(n) + " ranks with lora are not built");
  if (p.getStorePort() != 0 && dist::port_in_use(p.getStoreHost(), p.getStorePort()))
    bad("storePort: port " + std::to_string(p.getStorePort()) + " on " +
        std::string(p.getStoreHost()) +
        " is in use (the ranks' store listens there: choose another, or 0 for a free one)");
}

/// Checks against the graph: no more ranks than a step's groups.
std::vector<std::string> check_in_graph(capnp::DynamicStruct::Reader reader,
                                        const actor_in_graph& g) {
  const uint32_t n = reader.as<schema::TrainerParams>().getDataParallel();
  if (n <= g.batch_size) return {};
  return {"dataParallel: " + std::to_string(n) + " ranks, but a step has only " +
          std::to_string(g.batch_size) +
          " groups (run.batchSize): every rank needs at least one group to train on"};
}

std::vector<std::string> check(capnp::DynamicStruct::Reader reader, const rl::registries& losses) {
  auto p = reader.as<schema::TrainerParams>();
  std::vector<std::string> problems;
  auto bad = [&](const std::string& s) { problems.push_back(s); };
  for (auto& e : llm::model_ref_problems(llm::model_ref_of(reader), llm::model_use::weights))
    bad(e);
  // Open sets: names in the registries, which list the known ones.
  if (auto e = losses.estimators.check(std::string(p.getEstimator())); !e.empty())
    bad("estimator: " + e);
  if (auto e = losses.policy_losses.check(std::string(p.getPolicyLoss())); !e.empty())
    bad("policyLoss: " + e);
  // Every number of the params is finite (inf or nan would reach the optimizer or the loss).
  for (auto f : reader.getSchema().getFields()) {
    const auto t = f.getType().which();
    if (t != capnp::schema::Type::FLOAT64 && t != capnp::schema::Type::FLOAT32) continue;
    if (!std::isfinite(reader.get(f).as<double>())) {
      bad(std::string(f.getProto().getName()) + ": must be a finite number");
    }
  }
  if (!(p.getLr() > 0)) bad("lr: must be > 0");
  // AdamW divides by sqrt(v) + eps: with eps 0, a parameter that never had a gradient is 0 / 0.
  if (!(p.getAdamEps() > 0)) bad("adamEps: must be > 0");
  if (p.getEpsClip() < 0) bad("epsClip: must be >= 0");
  if (p.getDualClipC() != 0 && p.getDualClipC() <= 1) bad("dualClipC: must be > 1 (or 0 = off)");
  if (p.getTisLow() > p.getTisHigh()) bad("tisLow: must not exceed tisHigh");
  if (p.getMisLow() > p.getMisHigh()) bad("misLow: must not exceed misHigh");
  if (!(p.getTemperature() > 0)) bad("temperature: must be > 0");
  if (p.getMicroBatchTokens() == 0) bad("microBatchTokens: must be at least 1");
  if (p.getEvalInterval() > 0 && p.getEvalData().size() == 0)
    bad("evalData: required when evalInterval > 0");
  if (p.getEvalData().size() > 0 && runtime::named_files_read() &&
      !fs::exists(std::string(p.getEvalData()))) {
    bad("evalData: no file '" + std::string(p.getEvalData()) + "'");
  }
  check_data_parallel(p, bad);
  if (p.getLogprobDiffAlarm() < 0) bad("logprobDiffAlarm: must be >= 0 (0 = off)");
  if (p.getTrueOnPolicy()) {
    if (auto problem = llm::true_on_policy_problem(p.getDevice(), p.getDtype(), p.hasLora());
        !problem.empty())
      bad(problem);
    // Rank 0 compares its own share of the batch only, which the held check does not cover.
    if (p.getDataParallel() > 1) bad("trueOnPolicy: not built with dataParallel > 1");
  }
  if (p.hasLora()) {
    for (auto& problem : llm::lora_params_problems(p.getLora(), p.getModel())) bad(problem);
    if (p.getLora().getMerge()) bad("lora.merge: applies to the rollout kind only");
  }
  return problems;
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
  k.check_params = [losses](capnp::DynamicStruct::Reader r) { return check(r, *losses); };
  k.graph_settings = [](capnp::DynamicStruct::Reader r) -> std::vector<graph_setting> {
    auto p = r.as<schema::TrainerParams>();
    return {{"lora", "lora", llm::lora_agreement(p.hasLora(), p.getLora())},
            {"trueOnPolicy", "trueOnPolicy", p.getTrueOnPolicy() ? "on" : "off"},
            {"temperature", "temperature", llm::temperature_agreement(p.getTemperature())}};
  };
  k.check_in_graph = check_in_graph;
  k.spawn = [losses](caf::actor_system& sys, const actor_setup& s) -> caf::actor {
    auto p = s.params_struct->as<schema::TrainerParams>();
    for (const auto& problem : check(*s.params_struct, *losses))
      throw std::invalid_argument("params.trainer." + problem);
    runtime::progress_meter loading(
        s.progress, "actor '" + s.name + "': loading " + std::string(p.getModel()), 1);
    // With LoRA the base is frozen: one copy for this trainer, a LoRA engine and a reference
    // model of the same folder in this process.
    auto model =
        p.hasLora() ? s.store->get_or_make<llm::shared_bases>()->load(std::string(p.getModel()),
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
    std::string tok_error;
    init->codec = llm::text_codec::load(std::string(p.getModel()), std::string(p.getChatTemplate()),
                                        tok_error);
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
  };
  registry.add(k);
}

}  // namespace milesrt::trainer
