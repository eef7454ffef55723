#include "actors/rollout/rollout_params.hpp"

#include <cstdio>
#include <filesystem>

#include "actors/lib/llm/device.hpp"
#include "actors/lib/llm/lora_params.hpp"
#include "actors/lib/llm/model_folder.hpp"
#include "actors/lib/llm/model_ref.hpp"

namespace milesrt::rollout {
using serving::engine_config;
using serving::pause_mode;
using serving::sampling_params;

namespace {
// The model folder, as far as validation can see it (llm::model_folder_problem: the config within
// the limits, the weights' headers and shapes), and (on the CPU, with a fixed block count) that the
// KV cache fits the machine's memory (docs/limits.md). The weights' values are read when the actor
// starts.
void check_model(capnp::DynamicStruct::Reader reader, problem_list& problems) {
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
    problems.push_back({"kvBlocks", std::to_string(p.getKvBlocks()) + " blocks of " +
                                        std::to_string(p.getBlockSize()) + " tokens: " + line});
  }
}
}  // namespace

problem_list check_rollout_params(capnp::DynamicStruct::Reader reader) {
  auto p = reader.as<schema::RolloutParams>();
  problem_list problems;
  if (p.getKvBlocks() == 0) problems.push_back({"kvBlocks", "must be at least 1"});
  if (p.getBlockSize() == 0) problems.push_back({"blockSize", "must be at least 1"});
  if (p.getStepTokens() == 0) problems.push_back({"stepTokens", "must be at least 1"});
  if (!(p.getKvMemoryFraction() >= 0 && p.getKvMemoryFraction() <= 1))
    problems.push_back({"kvMemoryFraction", "must be in [0, 1]"});
  using limits = serving::request_limits;
  if (p.getSamplesPerPrompt() == 0 || p.getSamplesPerPrompt() > limits::max_n) {
    problems.push_back({"samplesPerPrompt", "must be from 1 to " + std::to_string(limits::max_n) +
                                                ", got " +
                                                std::to_string(p.getSamplesPerPrompt())});
  }
  if (p.getMaxNewTokens() == 0 || p.getMaxNewTokens() > limits::max_new_tokens) {
    problems.push_back({"maxNewTokens", "must be from 1 to " +
                                            std::to_string(limits::max_new_tokens) + ", got " +
                                            std::to_string(p.getMaxNewTokens())});
  }
  if (!(p.getTemperature() > 0)) {
    problems.push_back({"temperature", "must be > 0"});
  } else if (!(p.getTemperature() >= limits::min_temperature &&
               p.getTemperature() <= limits::max_temperature)) {
    problems.push_back({"temperature", "must be from 1e-05 to 100000"});
  }
  check_model(reader, problems);
  if (p.hasLora()) {
    for (auto& problem : llm::lora_params_problems(p.getLora(), p.getModel()))
      problems.push_back(problem);
  }
  if (!(p.getTopP() > 0 && p.getTopP() <= 1)) problems.push_back({"topP", "must be in (0, 1]"});
  if (p.getTrueOnPolicy()) {
    for (auto& problem : llm::true_on_policy_problems(p.getDevice(), p.getDtype(), p.hasLora()))
      problems.push_back(problem);
    if (p.hasLora() && p.getLora().getMerge())
      problems.push_back({"trueOnPolicy",
                          "lora.merge serves a merged copy of the base, whose "
                          "log-probs differ from the trainer's unmerged ones in their last bits"});
  }
  if (p.getAborted() == schema::RolloutParams::AbortedSamples::RESUME &&
      p.getPauseMode() != schema::RolloutParams::PauseMode::ABORT) {
    problems.push_back(
        {"aborted", "resume applies to pauseMode = abort (no other mode cuts samples off)"});
  }
  return problems;
}

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

engine_config engine_config_of(schema::RolloutParams::Reader p, bool cuda) {
  engine_config cfg;
  cfg.num_blocks = p.getKvBlocks();
  cfg.block_size = p.getBlockSize();
  cfg.max_tokens_per_step = p.getStepTokens();
  cfg.kv_memory_fraction = p.getKvMemoryFraction();
  // On the CPU the engine keeps its earlier cap of 64 running sequences (the main job's timing);
  // on the GPU only the KV budget bounds them.
  if (!cuda) cfg.max_running = 64;
  return cfg;
}

sampling_params sampling_of(schema::RolloutParams::Reader p, uint64_t seed, uint32_t replica) {
  sampling_params base;
  base.n = p.getSamplesPerPrompt();
  base.max_new_tokens = p.getMaxNewTokens();
  base.temperature = p.getTemperature();
  base.top_p = p.getTopP();
  base.top_k = p.getTopK();
  base.seed = p.getSeed() + seed * 7919 + replica;
  return base;
}

pause_mode pause_mode_of(schema::RolloutParams::Reader p) {
  return p.getPauseMode() == schema::RolloutParams::PauseMode::ABORT      ? pause_mode::abort
         : p.getPauseMode() == schema::RolloutParams::PauseMode::IN_PLACE ? pause_mode::in_place
                                                                          : pause_mode::retract;
}

}  // namespace milesrt::rollout
