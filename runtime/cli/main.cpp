// The milesrt executable: builds the subcommands (and, as they land, the registry of built-in actor
// kinds) and hands them to the generic command-line frame.
#include <iostream>

#include <caf/config.hpp>
#include <capnp/common.h>

#include "actors/llm/commands.hpp"
#include "actors/llm/device.hpp"
#include "actors/llm/tokenize_command.hpp"
#include "actors/rollout/generate_command.hpp"
#include "actors/rollout/rollout_kind.hpp"
#include "actors/buffer/group_filter_kind.hpp"
#include "actors/critic/critic_kind.hpp"
#include "actors/data/data_kind.hpp"
#include "actors/publisher/publisher_kind.hpp"
#include "actors/reference/reference_kind.hpp"
#include "actors/reward/reward_kinds.hpp"
#include "actors/trainer/trainer_kind.hpp"
#include "actors/trainer/train_bench_command.hpp"
#include "kernels/device.hpp"
#include "runtime/cli/command.hpp"
#include "runtime/core/kind.hpp"
#include "runtime/graph/loader.hpp"

namespace {

std::string version_text() {
  return std::string("milesrt ") + MILESRT_VERSION + "\n" + milesrt::llm::torch_summary() + "\n" +
         milesrt::kernels::cuda_summary() + "\nCAF " + std::to_string(CAF_MAJOR_VERSION) + "." +
         std::to_string(CAF_MINOR_VERSION) + "." + std::to_string(CAF_PATCH_VERSION) +
         ", Cap'n Proto " + std::to_string(CAPNP_VERSION_MAJOR) + "." +
         std::to_string(CAPNP_VERSION_MINOR) + "." + std::to_string(CAPNP_VERSION_MICRO);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace milesrt;
  // The registry of built-in actor kinds, in the dataflow's order.
  runtime::kind_registry kinds;
  data::register_data_kind(kinds);
  rollout::register_rollout_kind(kinds);
  reward::register_reward_kinds(kinds);
  buffer::register_group_filter_kind(kinds);
  trainer::register_trainer_kind(kinds);
  publisher::register_publisher_kind(kinds);
  reference::register_reference_kind(kinds);
  critic::register_critic_kind(kinds);
  cli::context ctx{std::cout, std::cerr, {}, &kinds};
  for (const auto& dir : graph::default_import_dirs()) ctx.schema_dirs.push_back(dir.string());
  std::vector<cli::command> commands = {
      cli::make_run_command(),
      cli::make_validate_command(),
      cli::make_graph_command(),
      cli::make_worker_command(),
      llm::make_score_command(),
      llm::make_bench_command(),
      trainer::make_train_bench_command(),
      rollout::make_generate_command(),
      llm::make_tokenize_command(),
  };
  return cli::run_main(argc, argv, commands, ctx, version_text);
}
