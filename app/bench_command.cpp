#include <fstream>

#include <chrono>
#include <iostream>
#include <random>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app/commands.hpp"
#include "actors/lib/llm/model.hpp"
#include "actors/lib/llm/tokenizer/tokenizer_bench.hpp"

namespace milesrt::app {
using namespace milesrt::llm;
namespace {

/// A field of /proc/self/status (VmRSS, VmHWM) in MiB.
double status_mib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) / 1024.0;
  }
  return 0;
}

/// Resets the peak resident size (VmHWM) to the current one, so that the next peak is the region's.
void reset_peak() { std::ofstream("/proc/self/clear_refs") << "5"; }

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

cli::command make_bench_command() {
  return {"bench", "Benchmarks: `bench forward` (tokens/s), `bench logprobs` (peak memory), `bench tokenize` (MB/s)",
          [](CLI::App& app, cli::context& ctx) -> cli::runner {
            struct options {
              std::string what, model, mode = "chunked", device = "cpu", dtype = "fp32";
              int64_t tokens = 0, seqs = 4, vocab = 151936, hidden = 1024, chunk = 256, layers = 0;
              tokenize_bench_options tokenize;
            };
            auto opt = std::make_shared<options>();
            app.add_option("what", opt->what, "forward | logprobs | tokenize")
                ->required()
                ->check(CLI::IsMember({"forward", "logprobs", "tokenize"}));
            app.add_option("--model", opt->model,
                           "forward: a Hugging Face model folder (default: Qwen3-0.6B's architecture, random weights)");
            app.add_option("--layers", opt->layers, "forward: keep only this many layers of the default model");
            app.add_option("--tokens", opt->tokens, "tokens in all (forward: 1024, logprobs: 8192)");
            app.add_option("--seqs", opt->seqs, "forward: sequences the tokens are split into");
            app.add_option("--mode", opt->mode, "logprobs: chunked | naive")
                ->check(CLI::IsMember({"chunked", "naive"}));
            app.add_option("--vocab", opt->vocab, "logprobs: vocabulary size");
            app.add_option("--hidden", opt->hidden, "logprobs: hidden size");
            app.add_option("--chunk", opt->chunk, "logprobs: rows per chunk");
            app.add_option("--device", opt->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
            app.add_option("--dtype", opt->dtype, "fp32 or bf16")->check(CLI::IsMember({"fp32", "bf16"}));
            app.add_option("--corpus", opt->tokenize.corpus,
                           "tokenize: JSON lines with \"text\" (.jsonl) or plain text split at blank lines");
            app.add_option("--threads", opt->tokenize.threads, "tokenize: batch threads (default: all)");
            return [opt, &ctx] {
              if (opt->what == "tokenize") {
                opt->tokenize.model = opt->model;
                if (opt->model.empty() || opt->tokenize.corpus.empty()) {
                  cli::print_error(ctx.err, "bench", "tokenize needs --model DIR and --corpus FILE");
                  return cli::exit_status::bad_input;
                }
                auto r = run_tokenize_bench(opt->tokenize);
                if (!r.error.empty()) {
                  cli::print_error(ctx.err, "bench", r.error);
                  return cli::exit_status::bad_input;
                }
                ctx.out << r.report << "\n";
                return cli::exit_status::ok;
              }
              const auto device = at::Device(opt->device == "cuda" ? at::kCUDA : at::kCPU);
              const auto dtype = opt->dtype == "bf16" ? at::kBFloat16 : at::kFloat;
              if (opt->device == "cuda" && !at::hasCUDA()) {
                cli::print_error(ctx.err, "bench", "--device cuda: no CUDA device is visible");
                return cli::exit_status::bad_input;
              }
              nlohmann::json out;
              out["device"] = opt->device;
              out["dtype"] = opt->dtype;
              out["threads"] = at::get_num_threads();
              if (opt->what == "logprobs") {
                const int64_t n = opt->tokens > 0 ? opt->tokens : 8192;
                auto opts = at::TensorOptions().dtype(dtype).device(device);
                auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
                auto hidden = at::randn({n, opt->hidden}, gen).to(opts);
                auto head = (0.02 * at::randn({opt->vocab, opt->hidden}, gen)).to(opts);
                auto targets = at::randint(opt->vocab, {n}, gen);
                const double base = status_mib("VmRSS");
                reset_peak();
                const double t0 = now_s();
                double checksum = 0;
                if (opt->mode == "chunked") {
                  auto s = chunked_scores(hidden, head, targets, 1.0, opt->chunk);
                  checksum = s.logprobs.sum().item<double>();
                } else {
                  // The naive way: every logit of every token at once.
                  auto logits = at::mm(hidden, head.t()).to(at::kFloat);
                  auto logp = at::log_softmax(logits, -1);
                  checksum = logp.gather(1, targets.to(device).unsqueeze(1)).sum().item<double>();
                }
                out["bench"] = "logprobs";
                out["mode"] = opt->mode;
                out["tokens"] = n;
                out["vocab"] = opt->vocab;
                out["chunk"] = opt->chunk;
                out["seconds"] = now_s() - t0;
                out["peak_extra_mib"] = status_mib("VmHWM") - base;
                out["logits_full_mib"] = double(n) * opt->vocab * 4 / (1 << 20);
                out["checksum"] = checksum;
              } else {
                std::unique_ptr<decoder> model;
                std::string name;
                try {
                  model = benchmark_model(opt->model, opt->layers, dtype, device, name);
                } catch (const std::exception& e) {
                  cli::print_error(ctx.err, "bench", e.what());
                  return cli::exit_status::bad_input;
                }
                const int64_t n = opt->tokens > 0 ? opt->tokens : 1024;
                std::mt19937 rng(3);
                std::vector<std::vector<int64_t>> seqs(opt->seqs);
                for (int64_t i = 0; i < n; ++i) seqs[i % opt->seqs].push_back(rng() % model->config().vocab_size);
                model->score_sequences({{1, 2, 3}}, 1.0);  // warm up
                const double t0 = now_s();
                auto s = model->score_sequences(seqs, 1.0);
                const double secs = now_s() - t0;
                out["bench"] = "forward";
                out["model"] = name;
                out["tokens"] = n;
                out["sequences"] = opt->seqs;
                out["seconds"] = secs;
                out["tokens_per_s"] = double(n) / secs;
                out["checksum"] = s[0].logprobs.sum().item<double>();
              }
              ctx.out << out.dump() << "\n";
              return cli::exit_status::ok;
            };
          }};
}

}  // namespace milesrt::app
