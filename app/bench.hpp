#pragma once
/// `milesrt bench <what>`: one file per benchmark (bench_<what>.cpp), each adding its options to
/// its CLI11 subcommand and returning the runner; bench_command.cpp lists them.

#include <CLI/CLI.hpp>
#include <c10/core/Device.h>

#include "runtime/cli/command.hpp"

namespace milesrt::app {

using bench_define = cli::runner (*)(CLI::App&, cli::context&);

cli::runner define_bench_forward(CLI::App& app, cli::context& ctx);   ///< forward tokens/s
cli::runner define_bench_logprobs(CLI::App& app, cli::context& ctx);  ///< chunked log-prob memory
cli::runner define_bench_tokenize(CLI::App& app, cli::context& ctx);  ///< tokenizer MB/s
cli::runner define_bench_rollout(CLI::App& app, cli::context& ctx);   ///< rollout engine tok/s
cli::runner define_bench_train(CLI::App& app, cli::context& ctx);     ///< trainer step, MFU

/// Helpers the benches share.
double bench_now_s();
/// Waits for the device's queued work (no-op on the CPU).
void bench_sync(const at::Device& device);

}  // namespace milesrt::app
