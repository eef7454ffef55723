// `milesrt bench forward`: forward tokens/s of a model over packed random sequences (no cache).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <nlohmann/json.hpp>
#include <random>

#include "actors/lib/llm/model.hpp"
#include "app/bench/bench.hpp"

namespace milesrt::app {

namespace {

struct bench_forward_options {
  std::string model, device = "cpu", dtype = "fp32";
  int64_t tokens = 1024, seqs = 4, layers = 0;
};

cli::exit_status bench_forward_command(const bench_forward_options& opt, cli::context& ctx) {
  const auto target = bench_target_of(opt.device, opt.dtype, "bench forward", ctx);
  if (!target) return cli::exit_status::bad_input;
  std::string name;
  auto model = bench_model(opt.model, opt.layers, *target, name, "bench forward", ctx);
  if (!model) return cli::exit_status::bad_input;
  std::mt19937 rng(3);
  std::vector<std::vector<int64_t>> seqs(opt.seqs);
  for (int64_t i = 0; i < opt.tokens; ++i)
    seqs[i % opt.seqs].push_back(rng() % model->config().vocab_size);
  model->score_sequences({{1, 2, 3}}, 1.0);  // warm up
  const double t0 = bench_now_s();
  auto s = model->score_sequences(seqs, 1.0);
  const double checksum = s[0].logprobs.sum().item<double>();
  const double secs = bench_now_s() - t0;
  nlohmann::json out = {{"bench", "forward"},
                        {"device", opt.device},
                        {"dtype", opt.dtype},
                        {"threads", at::get_num_threads()},
                        {"model", name},
                        {"tokens", opt.tokens},
                        {"sequences", opt.seqs},
                        {"seconds", secs},
                        {"tokens_per_s", double(opt.tokens) / secs},
                        {"checksum", checksum}};
  ctx.out << out.dump() << "\n";
  return cli::exit_status::ok;
}

}  // namespace

cli::runner define_bench_forward(CLI::App& app, cli::context& ctx) {
  auto opt = std::make_shared<bench_forward_options>();
  app.add_option(
      "--model", opt->model,
      "a Hugging Face model folder (default: Qwen3-0.6B's architecture, random weights)");
  app.add_option("--layers", opt->layers, "keep only this many layers of the default model");
  app.add_option("--tokens", opt->tokens, "tokens in all")->check(CLI::PositiveNumber);
  app.add_option("--seqs", opt->seqs, "sequences the tokens are split into")
      ->check(CLI::PositiveNumber);
  app.add_option("--device", opt->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--dtype", opt->dtype, "fp32 or bf16")->check(CLI::IsMember({"fp32", "bf16"}));
  return [opt, &ctx] { return bench_forward_command(*opt, ctx); };
}

}  // namespace milesrt::app
