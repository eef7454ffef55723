// The milesrt executable: builds the registry of built-in actor kinds and the subcommands, and
// hands them to runtime/'s generic command-line frame.
#include <csignal>
#include <iostream>

#include <caf/config.hpp>
#include <capnp/common.h>

#include "actors/lib/rl/builtin.hpp"
#include "app/builtin_kinds.hpp"
#include "runtime/core/extensions.hpp"
#include "app/commands.hpp"
#include "actors/lib/llm/device.hpp"
#include "app/tokenize_command.hpp"
#include "app/generate_command.hpp"
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
  // A write past the file-size limit (RLIMIT_FSIZE) then fails with EFBIG and is reported by the
  // code that wrote (a checkpoint fails with its error; the last complete one stays), instead of
  // SIGXFSZ killing the process mid-write.
  std::signal(SIGXFSZ, SIG_IGN);
  // The registry of actor kinds: the built-in ones; plugins named by graph files add theirs.
  runtime::kind_registry kinds;
  // The RL library's registries, offered to plugins (which may add losses and estimators) and
  // read by the trainer kind.
  auto losses = std::make_shared<rl::registries>(rl::builtin_registries());
  runtime::extension_points extensions;
  extensions.offer(rl::kRegistriesExtension, losses.get());
  app::register_builtin_kinds(kinds, losses);
  cli::context ctx{std::cout, std::cerr, {}, &kinds, &extensions};
  ctx.description = "milesrt: reinforcement-learning post-training of LLMs as a graph of actors";
  for (const auto& dir : graph::default_import_dirs()) ctx.schema_dirs.push_back(dir.string());
  std::vector<cli::command> commands = {
      cli::make_run_command(),
      cli::make_validate_command(),
      cli::make_graph_command(),
      cli::make_worker_command(),
      cli::make_watch_command(),
      app::make_score_command(),
      app::make_bench_command(),
      app::make_generate_command(),
      app::make_tokenize_command(),
  };
  return cli::run_main(argc, argv, commands, ctx, version_text);
}
