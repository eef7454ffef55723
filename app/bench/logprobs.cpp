// `milesrt bench logprobs`: peak host memory of chunked vs naive log-probs over a large vocabulary.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "actors/lib/llm/model.hpp"
#include "app/bench/bench.hpp"

namespace milesrt::app {
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

}  // namespace

namespace {

struct bench_logprobs_options {
  std::string mode = "chunked", device = "cpu", dtype = "fp32";
  int64_t tokens = 8192, vocab = 151936, hidden = 1024, chunk = 256;
};

cli::exit_status bench_logprobs_command(const bench_logprobs_options& opt, cli::context& ctx) {
  const auto target = bench_target_of(opt.device, opt.dtype, "bench logprobs", ctx);
  if (!target) return cli::exit_status::bad_input;
  const auto device = target->device;
  const auto dtype = target->dtype;
  const int64_t n = opt.tokens;
  auto opts = at::TensorOptions().dtype(dtype).device(device);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
  auto hidden = at::randn({n, opt.hidden}, gen).to(opts);
  auto head = (0.02 * at::randn({opt.vocab, opt.hidden}, gen)).to(opts);
  auto targets = at::randint(opt.vocab, {n}, gen);
  const double base = status_mib("VmRSS");
  reset_peak();
  const double t0 = bench_now_s();
  double checksum = 0;
  if (opt.mode == "chunked") {
    auto s = llm::chunked_scores(hidden, head, targets, 1.0, opt.chunk);
    checksum = s.logprobs.sum().item<double>();
  } else {
    // The naive way: every logit of every token at once.
    auto logits = at::mm(hidden, head.t()).to(at::kFloat);
    auto logp = at::log_softmax(logits, -1);
    checksum = logp.gather(1, targets.to(device).unsqueeze(1)).sum().item<double>();
  }
  nlohmann::json out = {{"bench", "logprobs"},
                        {"device", opt.device},
                        {"dtype", opt.dtype},
                        {"threads", at::get_num_threads()},
                        {"mode", opt.mode},
                        {"tokens", n},
                        {"vocab", opt.vocab},
                        {"chunk", opt.chunk},
                        {"seconds", bench_now_s() - t0},
                        {"peak_extra_mib", status_mib("VmHWM") - base},
                        {"logits_full_mib", double(n) * opt.vocab * 4 / (1 << 20)},
                        {"checksum", checksum}};
  ctx.out << out.dump() << "\n";
  return cli::exit_status::ok;
}

}  // namespace

cli::runner define_bench_logprobs(CLI::App& app, cli::context& ctx) {
  auto opt = std::make_shared<bench_logprobs_options>();
  app.add_option("--tokens", opt->tokens, "rows")->check(CLI::PositiveNumber);
  app.add_option("--mode", opt->mode, "chunked | naive")
      ->check(CLI::IsMember({"chunked", "naive"}));
  app.add_option("--vocab", opt->vocab, "vocabulary size")->check(CLI::PositiveNumber);
  app.add_option("--hidden", opt->hidden, "hidden size")->check(CLI::PositiveNumber);
  app.add_option("--chunk", opt->chunk, "rows per chunk")->check(CLI::PositiveNumber);
  app.add_option("--device", opt->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--dtype", opt->dtype, "fp32 or bf16")->check(CLI::IsMember({"fp32", "bf16"}));
  return [opt, &ctx] { return bench_logprobs_command(*opt, ctx); };
}

}  // namespace milesrt::app
