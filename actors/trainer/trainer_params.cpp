#include "actors/trainer/trainer_params.hpp"

#include <cmath>
#include <filesystem>
#include <functional>

#include "actors/lib/dist/nccl_collectives.hpp"
#include "actors/lib/dist/rendezvous.hpp"
#include "actors/lib/llm/device.hpp"
#include "actors/lib/llm/lora_params.hpp"
#include "actors/lib/llm/model_folder.hpp"
#include "actors/lib/llm/model_ref.hpp"
#include "runtime/core/user_file.hpp"

namespace milesrt::trainer {
using namespace milesrt::rl;  // losses, estimators, AdamW
using runtime::actor_in_graph;
namespace fs = std::filesystem;
using Params = schema::TrainerParams;

namespace {

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

/// The data-parallel params: at least one rank, NCCL in the build for GPUs, not with LoRA, a free
/// port.
void check_data_parallel(Params::Reader p, const std::function<void(problem)>& bad) {
  const uint32_t n = p.getDataParallel();
  if (n == 0) bad({"dataParallel", "must be at least 1 (the number of trainer ranks)"});
  if (!(p.getRankTimeoutSeconds() > 0)) bad({"rankTimeoutSeconds", "must be > 0"});
  if (n <= 1) return;
  if (p.getDevice() != schema::Device::CPU && !dist::nccl_available())
    bad({"dataParallel",
         std::to_string(n) +
             " ranks on cuda need the NCCL backend, which this build lacks (built without CUDA or "
             "NCCL): use device = cpu"});
  if (p.hasLora()) bad({"dataParallel", std::to_string(n) + " ranks with lora are not built"});
  if (p.getStorePort() != 0 && dist::port_in_use(p.getStoreHost(), p.getStorePort()))
    bad({"storePort",
         "port " + std::to_string(p.getStorePort()) + " on " + std::string(p.getStoreHost()) +
             " is in use (the ranks' store listens there: choose another, or 0 for a free one)"});
}

}  // namespace

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
  o.loss.distill_kl = to_kl(p.getDistillEstimator());
  o.lora_base_reference = p.hasLora() && p.getLoraBaseReference();
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

problem_list check_in_graph(capnp::DynamicStruct::Reader reader, const actor_in_graph& g) {
  const uint32_t n = reader.as<schema::TrainerParams>().getDataParallel();
  if (n <= g.batch_size) return {};
  return {{"dataParallel", std::to_string(n) + " ranks, but a step has only " +
                               std::to_string(g.batch_size) +
                               " groups (run.batchSize): every rank needs at least one group to "
                               "train on"}};
}

problem_list check_trainer_params(capnp::DynamicStruct::Reader reader,
                                  const rl::registries& losses) {
  auto p = reader.as<schema::TrainerParams>();
  problem_list problems;
  auto bad = [&](problem p) { problems.push_back(std::move(p)); };
  for (auto& e : llm::model_ref_problems(llm::model_ref_of(reader), llm::model_use::weights))
    bad(e);
  // Open sets: names in the registries, which list the known ones.
  if (auto e = losses.estimators.check(std::string(p.getEstimator())); !e.empty())
    bad({"estimator", e});
  if (auto e = losses.policy_losses.check(std::string(p.getPolicyLoss())); !e.empty())
    bad({"policyLoss", e});
  // Every number of the params is finite (inf or nan would reach the optimizer or the loss).
  for (auto f : reader.getSchema().getFields()) {
    const auto t = f.getType().which();
    if (t != capnp::schema::Type::FLOAT64 && t != capnp::schema::Type::FLOAT32) continue;
    if (!std::isfinite(reader.get(f).as<double>())) {
      bad({f.getProto().getName().cStr(), "must be a finite number"});
    }
  }
  if (!(p.getLr() > 0)) bad({"lr", "must be > 0"});
  // AdamW divides by sqrt(v) + eps: with eps 0, a parameter that never had a gradient is 0 / 0.
  if (!(p.getAdamEps() > 0)) bad({"adamEps", "must be > 0"});
  if (p.getEpsClip() < 0) bad({"epsClip", "must be >= 0"});
  if (p.getDualClipC() != 0 && p.getDualClipC() <= 1)
    bad({"dualClipC", "must be > 1 (or 0 = off)"});
  if (p.getTisLow() > p.getTisHigh()) bad({"tisLow", "must not exceed tisHigh"});
  if (p.getMisLow() > p.getMisHigh()) bad({"misLow", "must not exceed misHigh"});
  if (!(p.getTemperature() > 0)) bad({"temperature", "must be > 0"});
  if (p.getMicroBatchTokens() == 0) bad({"microBatchTokens", "must be at least 1"});
  if (p.getEvalInterval() > 0 && p.getEvalData().size() == 0)
    bad({"evalData", "required when evalInterval > 0"});
  if (p.getEvalData().size() > 0 && runtime::named_files_read() &&
      !fs::exists(std::string(p.getEvalData()))) {
    bad({"evalData", "no file '" + std::string(p.getEvalData()) + "'"});
  }
  check_data_parallel(p, bad);
  if (p.getLogprobDiffAlarm() < 0) bad({"logprobDiffAlarm", "must be >= 0 (0 = off)"});
  if (p.getDistillEstimator() == Params::KlType::NONE)
    bad({"distillEstimator", "must be k1, k2 or k3"});
  if (p.getLoraBaseReference() && !p.hasLora()) bad({"loraBaseReference", "needs lora"});
  if (p.getTrueOnPolicy()) {
    for (auto& problem : llm::true_on_policy_problems(p.getDevice(), p.getDtype(), p.hasLora()))
      bad(problem);
    // Rank 0 compares its own share of the batch only, which the held check does not cover.
    if (p.getDataParallel() > 1) bad({"trueOnPolicy", "not built with dataParallel > 1"});
  }
  if (p.hasLora()) {
    for (auto& problem : llm::lora_params_problems(p.getLora(), p.getModel())) bad(problem);
    if (p.getLora().getMerge()) bad({"lora.merge", "applies to the rollout kind only"});
  }
  return problems;
}

}  // namespace milesrt::trainer
