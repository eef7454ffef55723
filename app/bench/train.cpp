// `milesrt bench train`: times policy_trainer::train on random token sequences (RL objective, GRPO
// groups with random rewards), so that tokens/s and MFU are measured on the code the trainer
// actor runs. One JSON line out.

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "actors/lib/dist/rendezvous.hpp"
#include "actors/lib/llm/device.hpp"
#include "actors/lib/llm/lora.hpp"
#include "actors/lib/rl/optimizer.hpp"
#include "actors/trainer/rank_pool.hpp"
#include "actors/trainer/trainer_core.hpp"
#include "app/bench/bench.hpp"

namespace milesrt::app {
using namespace milesrt::llm;
using namespace milesrt::trainer;

namespace {

struct train_options {
  std::string model, device = "cpu", dtype = "fp32", profile;
  bool optimizer_probe = false;
  int64_t checkpoint_layers = -1;
  int64_t lora_rank = 0;
  int64_t data_parallel = 1;
  bool shard_optimizer = false;
  bool true_on_policy = false;
  int64_t layers = 0, seqs = 32, prompt = 256, response = 256, steps = 3, micro = 16384;
};

void add_train_options(CLI::App& app, train_options& opt) {
  app.add_option(
      "--model", opt.model,
      "a Hugging Face model folder (default: Qwen3-0.6B's architecture, random weights)");
  app.add_option("--layers", opt.layers, "keep only this many layers of the default model");
  app.add_option("--seqs", opt.seqs, "sequences per step (groups of 8)");
  app.add_option("--prompt", opt.prompt, "prompt tokens per sequence");
  app.add_option("--response", opt.response, "response tokens per sequence");
  app.add_option("--steps", opt.steps, "timed steps (after one warm-up step)");
  app.add_option("--micro-batch-tokens", opt.micro, "tokens per micro-batch");
  app.add_option(
      "--profile", opt.profile,
      "after the timed steps, profile one more step with libtorch's profiler (Kineto) and "
      "write its Chrome trace here (test/peers/trace_table.py sums its kernels)");
  app.add_option("--checkpoint-layers", opt.checkpoint_layers,
                 "activation checkpointing: recompute the first N layers in the backward (0: all; "
                 "default: none)");
  app.add_flag(
      "--optimizer-probe", opt.optimizer_probe,
      "after the timed steps, time the optimizer step alone: on the trainer's own master weights, "
      "gradient and weights (the gradient refilled with random values), then on fresh copies of "
      "the same tensors with a fresh optimizer (reported as optimizer_probe_*_ms); unlike the "
      "step, the probe leaves the gradient as it is (no zeroing)");
  app.add_option("--data-parallel", opt.data_parallel,
                 "trainer ranks (threads of this process, as the trainer kind's dataParallel): on "
                 "the CPU through Gloo, on CUDA rank r on the device r places after the first, "
                 "through NCCL; the batch is split between them")
      ->check(CLI::Range(int64_t{1}, int64_t{64}));
  app.add_flag("--shard-optimizer", opt.shard_optimizer,
               "with --data-parallel: ZeRO-1, each rank keeping 1/N of the optimizer state");
  app.add_option("--lora-rank", opt.lora_rank,
                 "LoRA adapters of this rank (alpha 2 x rank) on every projection (the attention "
                 "ones of a mixture-of-experts model); the base frozen; 0 = full fine-tuning")
      ->check(CLI::Range(int64_t{0}, llm::lora_limits::max_rank));
  app.add_flag("--true-on-policy", opt.true_on_policy,
               "the trueOnPolicy mode's batch-invariant kernels (cuda bf16)");
  app.add_option("--device", opt.device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--dtype", opt.dtype, "fp32 or bf16")->check(CLI::IsMember({"fp32", "bf16"}));
}

/// Random sequences in GRPO groups of 8 with random rewards.
std::vector<train_sequence> random_batch(const train_options& opt, int64_t vocab) {
  std::mt19937_64 rng(1);
  std::vector<train_sequence> batch;
  for (int64_t i = 0; i < opt.seqs; ++i) {
    train_sequence s;
    for (int64_t j = 0; j < opt.prompt; ++j) s.prompt.push_back(int64_t(rng() % vocab));
    for (int64_t j = 0; j < opt.response; ++j) s.output.push_back(int64_t(rng() % vocab));
    s.rollout_logprobs.assign(opt.response, -5.0f);
    s.reward = float(rng() % 2);
    s.group = i / 8;
    batch.push_back(std::move(s));
  }
  return batch;
}

/// Where the one-pass AdamW kernel's time inside the step comes from: the tensors it runs on
/// (their addresses and the device's history) or the values in them.
nlohmann::json optimizer_probe(policy_trainer& t, const at::Device& device) {
  nlohmann::json probe = nlohmann::json::object();
  auto& params = t.model().mutable_params();
  auto grad = params.grad();
  at::Tensor weights =
      params.buffer().scalar_type() == at::kFloat ? at::Tensor() : params.buffer().detach();
  auto& master = t.master_weights();
  auto time_steps = [&](rl::adamw& a, at::Tensor& m, const at::Tensor& g, const at::Tensor& w) {
    a.step(m, g, w, /*zero_grad=*/false);
    bench_sync(device);
    const auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < 3; ++k) a.step(m, g, w, /*zero_grad=*/false);
    bench_sync(device);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 3 * 1e3;
  };
  {
    at::NoGradGuard no_grad;
    grad.copy_(at::randn(grad.sizes(), grad.options().dtype(at::kFloat)) * 1e-4);
  }
  probe["optimizer_probe_own_tensors_ms"] = time_steps(t.optimizer(), master, grad, weights);
  auto master2 = master.clone();
  auto grad2 = grad.clone();
  auto weights2 = weights.defined() ? weights.clone() : at::Tensor();
  rl::adamw fresh(t.options().optimizer, master2);
  probe["optimizer_probe_fresh_copies_ms"] = time_steps(fresh, master2, grad2, weights2);
  probe["optimizer_probe_own_tensors_again_ms"] = time_steps(t.optimizer(), master, grad, weights);
  return probe;
}

/// The ranks 1 .. N-1 of a data-parallel bench (none for one rank), each with its own copy of the
/// bench model on its own device; step() runs one training step on every rank.
struct bench_ranks {
  std::unique_ptr<rank_pool> pool;
  std::string error;  ///< why the ranks could not start

  bench_ranks(const train_options& opt, const bench_target& target, const trainer_options& o) {
    if (opt.data_parallel <= 1) return;
    dist::group_options g;
    g.port = dist::pick_free_port(g.host);
    g.world_size = static_cast<int>(opt.data_parallel);
    auto make = [&opt, target, o](int rank, dist::collectives& group) {
      bench_target mine{rank_pool::device_of(target.device, rank), target.dtype};
      std::string name;
      auto model = llm::benchmark_model(opt.model, opt.layers, mine.dtype, mine.device, name);
      if (opt.lora_rank > 0) attach_bench_adapters(*model, opt.lora_rank);
      auto ro = o;
      ro.group = &group;
      return std::make_unique<policy_trainer>(std::move(model), ro);
    };
    try {
      pool = std::make_unique<rank_pool>(g, make, target.device);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  dist::collectives* group() { return pool ? &pool->group() : nullptr; }
  std::map<std::string, double> step(policy_trainer& t, const std::vector<train_sequence>& b) {
    if (!pool) return t.train(b);
    std::map<std::string, double> out;
    pool->run([&b](policy_trainer& r) { r.train(b); }, [&] { out = t.train(b); });
    return out;
  }
};

cli::exit_status bench_train(const train_options& opt, cli::context& ctx) {
  const auto target = bench_target_of(opt.device, opt.dtype, "bench train", ctx);
  if (!target) return cli::exit_status::bad_input;
  if (opt.data_parallel > 1 && (!opt.profile.empty() || opt.optimizer_probe || opt.lora_rank > 0)) {
    cli::print_error(ctx.err, "bench train",
                     "--data-parallel > 1 goes with neither --profile, --optimizer-probe nor "
                     "--lora-rank (they run rank 0 alone, or are not built with several ranks)");
    return cli::exit_status::bad_input;
  }
  const auto device = target->device;
  std::string name;
  auto model = bench_model(opt.model, opt.layers, *target, name, "bench train", ctx);
  if (!model) return cli::exit_status::bad_input;
  const int64_t vocab = model->config().vocab_size;
  if (opt.lora_rank > 0) attach_bench_adapters(*model, opt.lora_rank);
  if (!set_true_on_policy(*model, opt.true_on_policy, "bench train", ctx))
    return cli::exit_status::bad_input;
  trainer_options o;
  o.optimizer.lr = 1e-6;
  o.micro_batch_tokens = opt.micro;
  if (opt.checkpoint_layers >= 0) {
    o.activation_checkpointing = true;
    o.checkpoint_layers = opt.checkpoint_layers;
  }
  o.shard_optimizer = opt.shard_optimizer && opt.data_parallel > 1;
  bench_ranks ranks(opt, *target, o);
  if (!ranks.error.empty()) {
    cli::print_error(ctx.err, "bench train", "--data-parallel: " + ranks.error);
    return cli::exit_status::run_failed;
  }
  o.group = ranks.group();
  policy_trainer t(std::move(model), o);
  const std::vector<train_sequence> batch = random_batch(opt, vocab);
  ranks.step(t, batch);  // warm-up
  bench_sync(device);
  llm::reset_peak_memory(device);
  double secs = 0;
  std::map<std::string, double> last;
  for (int64_t k = 0; k < opt.steps; ++k) {
    auto t0 = std::chrono::steady_clock::now();
    last = ranks.step(t, batch);
    bench_sync(device);
    secs += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  if (!opt.profile.empty()) bench_profile(device, opt.profile, [&] { t.train(batch); });
  const double peak_gib = llm::peak_memory_gib(device);  // of the timed steps
  nlohmann::json probe =
      opt.optimizer_probe ? optimizer_probe(t, device) : nlohmann::json::object();
  const int64_t tokens = opt.seqs * (opt.prompt + opt.response);
  nlohmann::json out = {{"bench", "train"},
                        {"model", name},
                        {"device", opt.device},
                        {"dtype", opt.dtype},
                        {"tokens_per_step", tokens},
                        {"checkpoint_layers", opt.checkpoint_layers},
                        {"lora_rank", opt.lora_rank},
                        {"true_on_policy", opt.true_on_policy},
                        {"data_parallel", opt.data_parallel},
                        {"shard_optimizer", o.shard_optimizer},
                        {"seconds_per_step", secs / double(opt.steps)},
                        {"train_tokens_per_s", double(tokens) * double(opt.steps) / secs}};
  out.update(probe);
  // What training holds besides the frozen model: parameters trained, optimizer + master bytes.
  for (const char* k : {"trainer_trained_params", "trainer_optimizer_master_bytes"})
    if (last.count(k) != 0) out[k] = last.at(k);
  if (device.is_cuda()) out["peak_gib"] = peak_gib;
  if (device.is_cuda())
    out["mfu"] = train_step_flops(batch, t.model()) * double(opt.steps) / secs / 989e12 /
                 double(opt.data_parallel);  // per GPU
  ctx.out << out.dump() << std::endl;
  return cli::exit_status::ok;
}

}  // namespace

cli::runner define_bench_train(CLI::App& app, cli::context& ctx) {
  auto opt = std::make_shared<train_options>();
  add_train_options(app, *opt);
  return [opt, &ctx] { return bench_train(*opt, ctx); };
}

}  // namespace milesrt::app
