// `milesrt bench <what>`: the benchmarks as subcommands, one file each (bench.hpp).
#include <ATen/ATen.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <chrono>
#include <set>
#include <utility>
#include <vector>

#include "actors/lib/llm/lora.hpp"
#include "actors/lib/llm/model.hpp"
#include "app/bench/bench.hpp"
#include "app/commands.hpp"

namespace milesrt::app {

double bench_now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void bench_sync(const at::Device& device) {
  // A copy to the host waits for the work queued before it.
  if (device.is_cuda()) at::zeros({1}, at::TensorOptions().device(device)).cpu();
}

void bench_profile(const at::Device& device, const std::string& path,
                   const std::function<void()>& work) {
  namespace prof = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  const prof::ProfilerConfig config(prof::ProfilerState::KINETO);
  std::set<ActivityType> activities{ActivityType::CPU};
  if (device.is_cuda()) activities.insert(ActivityType::CUDA);
  prof::prepareProfiler(config, activities);
  prof::enableProfiler(config, activities);
  work();
  bench_sync(device);
  prof::disableProfiler()->save(path);
}

std::optional<bench_target> bench_target_of(const std::string& device, const std::string& dtype,
                                            const char* cmd, cli::context& ctx) {
  bench_target t{at::Device(device == "cuda" ? at::kCUDA : at::kCPU),
                 dtype == "bf16" ? at::kBFloat16 : at::kFloat};
  if (t.device.is_cuda() && !at::hasCUDA()) {
    cli::print_error(ctx.err, cmd, "--device cuda: no CUDA device is visible");
    return std::nullopt;
  }
  return t;
}

std::unique_ptr<llm::decoder> bench_model(const std::string& dir, int64_t layers,
                                          const bench_target& t, std::string& name, const char* cmd,
                                          cli::context& ctx) {
  try {
    return llm::benchmark_model(dir, layers, t.dtype, t.device, name);
  } catch (const std::exception& e) {
    cli::print_error(ctx.err, cmd, e.what());
    return nullptr;
  }
}

void attach_bench_adapters(llm::decoder& model, int64_t rank) {
  llm::lora_config c;
  c.rank = rank;
  c.alpha = 2.0 * double(rank);
  c.target_modules = {"q_proj", "k_proj", "v_proj", "o_proj"};
  if (model.config().num_moe_layers() == 0)
    c.target_modules.insert(c.target_modules.end(), {"gate_proj", "up_proj", "down_proj"});
  model.set_adapters(llm::make_adapters(model.config(), c, model.dtype(), model.device(), 1), c);
}

bool set_true_on_policy(llm::decoder& model, bool on, const char* cmd, cli::context& ctx) {
  try {
    model.set_batch_invariant(on);
    return true;
  } catch (const std::exception& e) {
    cli::print_error(ctx.err, cmd, std::string("--true-on-policy: ") + e.what());
    return false;
  }
}

cli::command make_bench_command() {
  return {
      "bench",
      "Benchmarks: forward, logprobs, tokenize, rollout, train, optim, gemm, publish (see "
      "docs/benchmarks.md)",
      [](CLI::App& app, cli::context& ctx) -> cli::runner {
        const std::vector<std::tuple<const char*, const char*, bench_define>> benches = {
            {"forward", "Forward tokens/s of a model (packed sequences, no cache)",
             define_bench_forward},
            {"logprobs", "Peak memory of chunked vs naive log-probs over a large vocabulary",
             define_bench_logprobs},
            {"tokenize", "Tokenizer MB/s on a corpus (single thread and batch)",
             define_bench_tokenize},
            {"rollout",
             "The rollout engine: tok/s, ms per decode step, prefill tok/s, peak GPU memory",
             define_bench_rollout},
            {"train", "Trainer steps on random sequences (tokens/s, MFU on CUDA)",
             define_bench_train},
            {"optim",
             "One AdamW step over fp32 master weights (GPU: beside libtorch's fused AdamW)",
             define_bench_optim},
            {"gemm", "The batch-invariant GEMM beside cuBLAS on a model's projection shapes (GPU)",
             define_bench_gemm},
            {"publish",
             "A version of the weights handed to an engine (colocated, CUDA IPC) vs a device copy",
             define_bench_publish},
        };
        app.require_subcommand(1);
        std::vector<std::pair<CLI::App*, cli::runner>> subs;
        for (const auto& [name, summary, define] : benches) {
          auto* sub = app.add_subcommand(name, summary);
          subs.emplace_back(sub, define(*sub, ctx));
        }
        return [subs] {
          for (const auto& [sub, run] : subs)
            if (sub->parsed()) return run();
          return cli::exit_status::bad_input;
        };
      }};
}

}  // namespace milesrt::app
