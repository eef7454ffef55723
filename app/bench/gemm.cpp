// `milesrt bench gemm`: the batch-invariant GEMM (kernels/gemm/invariant_gemm: CUTLASS's tile
// shapes with one walk over K, no split-K) beside at::mm (cuBLAS's choice by shape) on a model's
// projection shapes and several row counts: milliseconds of each, and whether each keeps a row's
// bits when the number of rows changes (the first rows of every call against the same rows of the
// largest call). What the true on-policy mode would cost in its GEMMs. One JSON line per shape.

#include <ATen/ATen.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "actors/lib/llm/device.hpp"
#include "app/bench/bench.hpp"
#include "kernels/gemm/invariant_gemm.hpp"

namespace milesrt::app {

namespace {

struct bench_gemm_options {
  int64_t hidden = 2048, intermediate = 6144, heads = 16, kv_heads = 8, head_dim = 128;
  int64_t vocab = 151936, steps = 20;
  std::vector<int64_t> rows = {1, 16, 64, 256, 1024, 4096};
};

cli::exit_status bench_gemm_command(const bench_gemm_options& opt, cli::context& ctx) {
  const auto target = bench_target_of("cuda", "bf16", "bench gemm", ctx);
  if (!target) return cli::exit_status::bad_input;
  const auto dev = target->device;
  const int64_t h = opt.hidden, q = opt.heads * opt.head_dim, kv = opt.kv_heads * opt.head_dim;
  const std::vector<std::tuple<const char*, int64_t, int64_t>> shapes = {
      {"qkv", q + 2 * kv, h},
      {"o", h, q},
      {"gate_up", 2 * opt.intermediate, h},
      {"down", h, opt.intermediate},
      {"lm_head", opt.vocab, h}};
  const int64_t most = *std::max_element(opt.rows.begin(), opt.rows.end());
  auto bf16 = at::TensorOptions().dtype(at::kBFloat16).device(dev);
  for (const auto& [name, n, k] : shapes) {
    auto w = at::randn({n, k}, bf16) * 0.02;
    auto x = at::randn({most, k}, bf16);
    auto invariant = [&](int64_t m) {
      auto y = at::empty({m, n}, bf16);
      kernels::invariant_gemm_bf16_cuda(x.data_ptr(), k, w.data_ptr(), y.data_ptr(), n, m, n, k,
                                        llm::current_cuda_stream());
      return y;
    };
    auto cublas = [&](int64_t m) { return at::mm(x.narrow(0, 0, m), w.t()); };
    const auto full_inv = invariant(most), full_mm = cublas(most);
    nlohmann::json out = {{"bench", "gemm"}, {"shape", name}, {"n", n}, {"k", k}};
    for (const int64_t m : opt.rows) {
      auto time_of = [&](auto&& fn) {
        fn(m);
        bench_sync(dev);
        const double t0 = bench_now_s();
        for (int64_t i = 0; i < opt.steps; ++i) fn(m);
        bench_sync(dev);
        return (bench_now_s() - t0) / double(opt.steps) * 1e3;
      };
      const std::string r = std::to_string(m);
      out["invariant_ms_" + r] = time_of(invariant);
      out["cublas_ms_" + r] = time_of(cublas);
      out["invariant_rows_equal_" + r] = at::equal(invariant(m), full_inv.narrow(0, 0, m));
      out["cublas_rows_equal_" + r] = at::equal(cublas(m), full_mm.narrow(0, 0, m));
    }
    ctx.out << out.dump() << std::endl;
  }
  return cli::exit_status::ok;
}

}  // namespace

cli::runner define_bench_gemm(CLI::App& app, cli::context& ctx) {
  auto opt = std::make_shared<bench_gemm_options>();
  app.add_option("--hidden", opt->hidden, "hidden size (default: Qwen3-1.7B's)");
  app.add_option("--intermediate", opt->intermediate, "MLP intermediate size");
  app.add_option("--heads", opt->heads, "query heads");
  app.add_option("--kv-heads", opt->kv_heads, "key/value heads");
  app.add_option("--head-dim", opt->head_dim, "head size");
  app.add_option("--vocab", opt->vocab, "vocabulary (the LM head's rows)");
  app.add_option("--rows", opt->rows, "row counts (tokens) to time, e.g. --rows 1 64 4096")
      ->check(CLI::PositiveNumber);
  app.add_option("--steps", opt->steps, "timed calls per row count (after one warm-up call)")
      ->check(CLI::PositiveNumber);
  return [opt, &ctx] { return bench_gemm_command(*opt, ctx); };
}

}  // namespace milesrt::app
