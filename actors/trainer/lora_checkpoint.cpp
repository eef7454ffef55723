// The LoRA parts of policy_trainer: the base's hash, the base as the reference model (where the
// graph says so), and checkpoints of the adapters alone.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "actors/lib/rl/master_weights.hpp"
#include "actors/lib/weights/tensor_hash.hpp"
#include "actors/trainer/batch_layout.hpp"
#include "actors/trainer/scoring.hpp"
#include "actors/trainer/trainer_core.hpp"
#include "runtime/core/untrusted_text.hpp"
#include "runtime/core/user_file.hpp"

namespace milesrt::trainer {
namespace fs = std::filesystem;

std::string lora_base_hash(const llm::flat_params& base) {
  const auto hashes = weights::param_hashes(base);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(
                    weights::bytes_hash(hashes.data(), hashes.size() * sizeof(uint64_t))));
  return hex;
}

at::Tensor policy_trainer::base_logprobs(const std::vector<train_sequence>& batch,
                                         const batch_layout& layout) const {
  // Only where the graph says so (loraBaseReference): the base is no teacher, and a graph that
  // forgot its reference actor is refused rather than anchored to the base unasked.
  const bool needs_ref = options_.loss.kl != rl::kl_estimator::none || options_.kl_in_reward;
  if (model_->lora() == nullptr || !options_.lora_base_reference || !needs_ref ||
      layout.ref_logprobs.defined() || layout.num_tokens == 0)
    return layout.ref_logprobs;
  at::NoGradGuard no_grad;
  adapter_pass base;
  base.off = true;
  std::vector<at::Tensor> parts;
  for (const auto& mb : layout.micro_batches)
    parts.push_back(score_sequences(*model_, batch, mb, options_, nullptr, base).logprobs);
  return at::cat(parts).to(at::kFloat);
}

namespace {

nlohmann::json lora_record(const llm::lora_config& c, const std::string& base_model,
                           const std::string& base_hash, int64_t elements) {
  return {{"format", "milesrt-lora-checkpoint 1"},
          {"base_model", base_model},
          {"base_hash", base_hash},
          {"rank", c.rank},
          {"alpha", c.alpha},
          {"use_rslora", c.use_rslora},
          {"target_modules", c.target_modules},
          {"target_parameters", c.target_parameters},
          {"elements", elements}};
}

}  // namespace

void policy_trainer::save_lora(const fs::path& dir) const {
  const auto record = lora_record(*model_->lora(), options_.base_model, base_hash_,
                                  model_->published().buffer().numel());
  {
    std::ofstream out(dir / "lora.json");
    out << record.dump(2) << "\n";
    if (!out) throw std::runtime_error("cannot write " + (dir / "lora.json").string());
  }
  // The adapters' fp32 master weights are the whole model state (the base is frozen).
  rl::save_optimizer_state(dir, *adam_, master_, /*with_master=*/true);
}

void policy_trainer::load_lora(const fs::path& dir) {
  const fs::path file = dir / "lora.json";
  const std::string problem = runtime::regular_file_problem(file);
  if (!problem.empty() && problem != "no such file")
    throw std::runtime_error(file.string() + ": " + problem);
  std::ifstream in(file);
  if (!in) {
    throw std::runtime_error("cannot read " + file.string() +
                             ": a checkpoint of full weights cannot resume a LoRA trainer");
  }
  std::stringstream text;
  text << in.rdbuf();
  if (auto deep = runtime::json_nesting_problem(text.str()); !deep.empty())
    throw std::runtime_error(file.string() + ": " + deep);
  nlohmann::json saved;
  try {
    saved = nlohmann::json::parse(text.str());
  } catch (const std::exception& e) {
    throw std::runtime_error(file.string() + ": " + e.what());
  }
  const auto want = lora_record(*model_->lora(), options_.base_model, base_hash_,
                                model_->published().buffer().numel());
  if (saved.value("base_hash", std::string()) != base_hash_) {
    throw std::runtime_error(file.string() + ": the adapters were trained on base '" +
                             saved.value("base_model", std::string("?")) + "' (hash " +
                             saved.value("base_hash", std::string("?")) +
                             "); this run's base is '" + options_.base_model + "' (hash " +
                             base_hash_ + ")");
  }
  for (const char* field :
       {"rank", "alpha", "use_rslora", "target_modules", "target_parameters", "elements"}) {
    auto got = saved.value(field, nlohmann::json());
    // Checkpoints written before target_parameters existed adapted no experts.
    if (got.is_null() && std::string(field) == "target_parameters") got = nlohmann::json::array();
    if (got != want[field]) {
      throw std::runtime_error(file.string() + ": lora." + field + " is " + got.dump() +
                               " there, " + want[field].dump() + " in this run");
    }
  }
  rl::load_optimizer_state(dir, *adam_);
  at::NoGradGuard no_grad;
  auto& adapters = model_->mutable_published();
  master_.copy_(rl::read_master(dir, master_.numel()).to(master_.device()));
  if (adapters.buffer().scalar_type() != at::kFloat) adapters.buffer().detach().copy_(master_);
  adapters.rebuild_views();
  // A resumed run would train NaN adapters without a word: refused, naming the tensor.
  if (auto bad = adapters.first_non_finite())
    throw std::runtime_error((dir / "master.bin").string() + ": " + bad->second);
}

}  // namespace milesrt::trainer
