// `milesrt bench optim`: one AdamW step over N fp32 master weights with a bf16 gradient, as the
// trainer takes it on the GPU (rl::adamw: one pass of kernels/optim/adamw that also refreshes the
// bf16 weights and zeroes the gradient), beside libtorch's fused AdamW over the same bytes (its
// kernel wants an fp32 gradient: the conversion, the step and the bf16 refresh are timed together,
// and the step alone), and a device-to-device copy of the master weights as the bandwidth
// yardstick. One JSON line out.

#include <ATen/ATen.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "actors/lib/llm/device.hpp"
#include "actors/lib/rl/optimizer.hpp"
#include "app/bench/bench.hpp"

namespace milesrt::app {

namespace {

struct bench_optim_options {
  int64_t params = 1720574976, steps = 5;
  double zero_fraction = 0, fragment_gib = 0;
  std::string order = "bench";
  std::string device = "cuda";
};

cli::exit_status bench_optim_command(const bench_optim_options& opt, cli::context& ctx) {
  const auto target = bench_target_of(opt.device, "bf16", "bench optim", ctx);
  if (!target) return cli::exit_status::bad_input;
  const auto dev = target->device;
  const int64_t n = opt.params;
  auto f32 = at::TensorOptions().dtype(at::kFloat).device(dev);
  std::vector<at::Tensor> kept;
  {
    std::vector<at::Tensor> churn;
    std::mt19937_64 rng(7);
    double filled = 0;
    while (filled < opt.fragment_gib * double(1ull << 30)) {
      const int64_t bytes = (int64_t(1) << 20) * int64_t(1 + rng() % 256);
      churn.push_back(at::empty({bytes}, f32.dtype(at::kByte)));
      filled += double(bytes);
    }
    for (size_t i = 0; i < churn.size(); i += 2) kept.push_back(churn[i]);
  }
  llm::release_cached_memory(dev);  // the freed half goes back to the driver: holes
  at::Tensor master, weights, grad;
  if (opt.order == "trainer") {
    // As the trainer makes them: the bf16 weights, their gradient, then the fp32 master copy.
    weights = (at::randn({n}, f32) * 0.02).to(at::kBFloat16);
    grad = at::zeros_like(weights);
    grad.copy_(at::randn({n}, f32) * 1e-4);
    master = weights.to(at::kFloat).clone();
  } else {
    master = at::randn({n}, f32) * 0.02;
    weights = master.to(at::kBFloat16);
    grad = (at::randn({n}, f32) * 1e-4).to(at::kBFloat16);
  }
  grad.narrow(0, 0, static_cast<int64_t>(opt.zero_fraction * double(n))).zero_();
  rl::adamw_options o;
  o.lr = 1e-6;
  auto time_of = [&](auto&& fn) {
    fn();
    bench_sync(dev);
    const double t0 = bench_now_s();
    for (int64_t i = 0; i < opt.steps; ++i) fn();
    bench_sync(dev);
    return (bench_now_s() - t0) / double(opt.steps) * 1e3;
  };
  rl::adamw ours(o, master);
  const double ours_ms = time_of([&] { ours.step(master, grad, weights, /*zero_grad=*/false); });
  nlohmann::json out = {{"bench", "optim"},
                        {"device", opt.device},
                        {"params", n},
                        {"zero_fraction", opt.zero_fraction},
                        {"fragment_gib", opt.fragment_gib},
                        {"order", opt.order},
                        {"milesrt_adamw_ms", ours_ms}};
  if (dev.is_cuda()) {
    auto m = at::zeros_like(master), v = at::zeros_like(master);
    auto step = at::ones({}, f32);
    auto scale = at::ones({}, f32);
    at::Tensor g32;
    const double torch_step_ms = time_of([&] {
      if (!g32.defined()) g32 = grad.to(at::kFloat);
      at::_fused_adamw_({master}, {g32}, {m}, {v}, {}, {step}, o.lr, o.beta1, o.beta2,
                        o.weight_decay, o.eps, false, false, scale, c10::nullopt);
    });
    const double torch_all_ms = time_of([&] {
      g32 = grad.to(at::kFloat);
      at::_fused_adamw_({master}, {g32}, {m}, {v}, {}, {step}, o.lr, o.beta1, o.beta2,
                        o.weight_decay, o.eps, false, false, scale, c10::nullopt);
      weights.copy_(master);
      grad.zero_();
    });
    auto dst = at::empty_like(master);
    const double copy_ms = time_of([&] { dst.copy_(master); });
    out["libtorch_fused_adamw_step_ms"] = torch_step_ms;
    out["libtorch_fused_adamw_with_conversion_refresh_zero_ms"] = torch_all_ms;
    out["fp32_copy_ms"] = copy_ms;
    out["milesrt_bytes_gb"] = double(n) * 28 / 1e9;
    out["copy_bytes_gb"] = double(n) * 8 / 1e9;
  }
  ctx.out << out.dump() << std::endl;
  return cli::exit_status::ok;
}

}  // namespace

cli::runner define_bench_optim(CLI::App& app, cli::context& ctx) {
  auto opt = std::make_shared<bench_optim_options>();
  app.add_option("--params", opt->params, "parameters (default: Qwen3-1.7B's count)");
  app.add_option("--steps", opt->steps, "timed steps (after one warm-up step)");
  app.add_option(
         "--zero-fraction", opt->zero_fraction,
         "the leading fraction of the gradient that is exactly zero, as the rows of tokens a batch "
         "never saw in an embedding (about 0.18 of Qwen3-1.7B)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option(
      "--fragment-gib", opt->fragment_gib,
      "before the buffers are made, fill this much device memory with tensors of random sizes "
      "(1 to 256 MiB) and free every other one, as a trainer's model loading leaves it");
  app.add_option("--order", opt->order,
                 "bench: master, weights, gradient; trainer: the trainer's order (weights, "
                 "gradient, master)")
      ->check(CLI::IsMember({"bench", "trainer"}));
  app.add_option("--device", opt->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  return [opt, &ctx] { return bench_optim_command(*opt, ctx); };
}

}  // namespace milesrt::app
