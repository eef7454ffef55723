// `milesrt bench <what>`: the benchmarks as subcommands, one file each (bench.hpp).
#include <ATen/ATen.h>

#include <chrono>
#include <utility>
#include <vector>

#include "app/bench.hpp"
#include "app/commands.hpp"

namespace milesrt::app {

double bench_now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void bench_sync(const at::Device& device) {
  // A copy to the host waits for the work queued before it.
  if (device.is_cuda()) at::zeros({1}, at::TensorOptions().device(device)).cpu();
}

cli::command make_bench_command() {
  return {"bench", "Benchmarks: forward, logprobs, tokenize, rollout, train (see BENCHMARKS.md)",
          [](CLI::App& app, cli::context& ctx) -> cli::runner {
            const std::vector<std::tuple<const char*, const char*, bench_define>> benches = {
                {"forward", "Forward tokens/s of a model (packed sequences, no cache)", define_bench_forward},
                {"logprobs", "Peak memory of chunked vs naive log-probs over a large vocabulary",
                 define_bench_logprobs},
                {"tokenize", "Tokenizer MB/s on a corpus (single thread and batch)", define_bench_tokenize},
                {"rollout", "The rollout engine: tok/s, ms per decode step, prefill tok/s, peak GPU memory",
                 define_bench_rollout},
                {"train", "Trainer steps on random sequences (tokens/s, MFU on CUDA)", define_bench_train},
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
