#pragma once
/// `milesrt bench <what>`: one file per benchmark (app/bench/<what>.cpp), each adding its options
/// to its CLI11 subcommand and returning the runner; command.cpp lists them.

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "runtime/cli/command.hpp"

namespace milesrt::llm {
class decoder;
class flat_params;
}  // namespace milesrt::llm

namespace milesrt::app {

using bench_define = cli::runner (*)(CLI::App&, cli::context&);

cli::runner define_bench_forward(CLI::App& app, cli::context& ctx);   ///< forward tokens/s
cli::runner define_bench_logprobs(CLI::App& app, cli::context& ctx);  ///< chunked log-prob memory
cli::runner define_bench_tokenize(CLI::App& app, cli::context& ctx);  ///< tokenizer MB/s
cli::runner define_bench_rollout(CLI::App& app, cli::context& ctx);   ///< rollout engine tok/s
cli::runner define_bench_train(CLI::App& app, cli::context& ctx);     ///< trainer step, MFU
cli::runner define_bench_optim(CLI::App& app, cli::context& ctx);  ///< one AdamW step vs libtorch's
cli::runner define_bench_gemm(CLI::App& app, cli::context& ctx);   ///< invariant GEMM vs cuBLAS
cli::runner define_bench_publish(CLI::App& app,
                                 cli::context& ctx);  ///< weights handed to an engine

/// Helpers the benches share.
double bench_now_s();
/// Waits for the device's queued work (no-op on the CPU).
void bench_sync(const at::Device& device);
/// Runs `work` under libtorch's profiler (Kineto: host and, on CUDA, device activity) and writes
/// its Chrome trace to `path` (test/peers/trace_table.py sums its kernels).
void bench_profile(const at::Device& device, const std::string& path,
                   const std::function<void()>& work);

/// Where a benchmark runs, from its --device (cpu|cuda) and --dtype (fp32|bf16).
struct bench_target {
  at::Device device;
  at::ScalarType dtype;
};
/// The target, or nullopt with `cmd`'s error printed when cuda is asked for and none is visible.
std::optional<bench_target> bench_target_of(const std::string& device, const std::string& dtype,
                                            const char* cmd, cli::context& ctx);
/// llm::benchmark_model on the target (`name` says which model); null with `cmd`'s error printed.
std::unique_ptr<llm::decoder> bench_model(const std::string& dir, int64_t layers,
                                          const bench_target& t, std::string& name, const char* cmd,
                                          cli::context& ctx);
/// `bench publish --gpus N`: the trainer's buffer (on cuda:0) broadcast and sent p2p by NCCL to
/// copies on cuda:1 .. cuda:N-1, beside a peer copy cuda:0 -> cuda:1 (publish_gpus.cpp). Throws
/// std::invalid_argument when the machine has fewer GPUs or the build no NCCL.
void multi_gpu_publish_rows(const llm::flat_params& trainer, int gpus, int64_t steps,
                            nlohmann::json& out);
/// `--lora-rank`: attaches new LoRA adapters of rank `rank` (alpha 2 x rank, seed 1) on every
/// projection (the attention ones of a mixture-of-experts model); the base is left as it is.
void attach_bench_adapters(llm::decoder& model, int64_t rank);
/// `--true-on-policy`: the model runs the mode's batch-invariant kernels when `on`; false with
/// `cmd`'s error printed when it cannot (not bf16 on cuda, head size, adapters).
bool set_true_on_policy(llm::decoder& model, bool on, const char* cmd, cli::context& ctx);

}  // namespace milesrt::app
