// The milesrt executable: builds the registry of built-in actor kinds and the subcommands, and
// hands them to runtime/'s generic command-line frame.
#include <capnp/common.h>

#include <caf/actor_system_config.hpp>
#include <caf/config.hpp>
#include <caf/thread_hook.hpp>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>

#include "actors/buffer/buffer_policy.hpp"
#include "actors/lib/llm/device.hpp"
#include "actors/lib/rl/builtin.hpp"
#include "app/builtin_kinds.hpp"
#include "app/commands.hpp"
#include "app/generate_command.hpp"
#include "app/schema_renames.hpp"
#include "app/tokenize_command.hpp"
#include "kernels/device.hpp"
#include "runtime/cli/command.hpp"
#include "runtime/core/extensions.hpp"
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

/// Each thread of the actor system runs libtorch's CPU operators with this many threads:
/// MILESRT_INTRA_OP_THREADS, 1 by default. Actors, not operators, are the unit of parallelism:
/// the actor system keeps one thread per core busy with actors (the rollout engine, the trainer,
/// evaluation overlap where the schedule allows), and an OpenMP team per actor thread on top of
/// that oversubscribes the cores; on the main job's small models each operator is too small to
/// split anyway, and the teams' fork/join costs more than it saves (SFT steps 1.5x faster with 1,
/// docs/benchmarks.md). Ray's workers make the same choice (OMP_NUM_THREADS=1).
class intra_op_threads : public caf::thread_hook {
 public:
  explicit intra_op_threads(int n) : n_(n) {}
  void init(caf::actor_system&) override {}
  void thread_started() override { milesrt::llm::set_intra_op_threads(n_); }
  void thread_terminates() override {}

 private:
  int n_;
};

/// MILESRT_INTRA_OP_THREADS (a positive integer) or 1; anything else stops the program.
int intra_op_threads_wanted() {
  const char* v = std::getenv("MILESRT_INTRA_OP_THREADS");
  if (v == nullptr || *v == 0) return 1;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*end != 0 || n < 1 || n > 1024) {
    std::cerr << "milesrt: error: MILESRT_INTRA_OP_THREADS=" << v
              << ": expected a thread count from 1 to 1024\n";
    std::exit(2);
  }
  return static_cast<int>(n);
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
  // The trajectory buffer's policies, offered the same way.
  auto buffer_policies = std::make_shared<buffer::policy_registry>(buffer::builtin_policies());
  extensions.offer(buffer::kPolicyExtension, buffer_policies.get());
  // The environment kind's environments, offered the same way.
  auto environments =
      std::make_shared<environment::environment_registry>(environment::builtin_environments());
  extensions.offer(environment::kEnvironmentExtension, environments.get());
  app::register_builtin_kinds(kinds, losses, buffer_policies, environments);
  kinds.add_types([threads = intra_op_threads_wanted()](caf::actor_system_config& config) {
    config.add_thread_hook<intra_op_threads>(threads);
  });
  cli::context ctx{std::cout, std::cerr, {}, &kinds, &extensions};
  ctx.description = "milesrt: reinforcement-learning post-training of LLMs as a graph of actors";
  for (const auto& dir : graph::default_import_dirs()) ctx.schema_dirs.push_back(dir.string());
  ctx.renames = &app::schema_renames();
  std::vector<cli::command> commands = {
      cli::make_run_command(),     cli::make_validate_command(), cli::make_graph_command(),
      cli::make_worker_command(),  cli::make_watch_command(),    app::make_score_command(),
      app::make_bench_command(),   app::make_generate_command(), app::make_tokenize_command(),
      app::make_upgrade_command(),
  };
  return cli::run_main(argc, argv, commands, ctx, version_text);
}
