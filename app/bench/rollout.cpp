// `milesrt bench rollout`: the rollout engine end to end on random prompts: B sequences of P prompt
// tokens each generate exactly N tokens (no stop token). Reports tok/s over the whole run, ms per
// decode-only step, prefill tok/s and peak GPU memory, as one JSON line. The prompts can be saved
// (--save-prompts) for the peer script test/peers/hf_generate.py to run the same ones.
#include <ATen/ATen.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "actors/lib/llm/model.hpp"
#include "actors/lib/serving/engine.hpp"
#include "app/bench/bench.hpp"

#ifdef MILESRT_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace milesrt::app {
namespace {

struct rollout_options {
  std::string model, device = "cpu", dtype = "fp32", save_prompts, profile;
  int64_t layers = 0, batch = 64, prompt_len = 128, new_tokens = 256, block_size = 16;
  int64_t kv_blocks = 0, step_tokens = 8192;
  double kv_fraction = 0.9, temperature = 1.0;
  uint64_t seed = 1;
  bool overlap = true;
  bool true_on_policy = false;
};

void add_rollout_options(CLI::App& app, rollout_options& opt) {
  app.add_option(
      "--model", opt.model,
      "a Hugging Face model folder (default: Qwen3-0.6B's architecture, random weights)");
  app.add_option("--layers", opt.layers, "keep only this many layers of the default model");
  app.add_option("--batch", opt.batch, "sequences, all submitted at once")
      ->check(CLI::PositiveNumber);
  app.add_option("--prompt-len", opt.prompt_len, "prompt tokens per sequence")
      ->check(CLI::PositiveNumber);
  app.add_option("--new-tokens", opt.new_tokens, "tokens generated per sequence")
      ->check(CLI::PositiveNumber);
  app.add_option("--device", opt.device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--dtype", opt.dtype, "fp32 or bf16")->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--kv-memory-fraction", opt.kv_fraction,
                 "cuda: the KV pool's share of the free GPU memory (default 0.9)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--kv-blocks", opt.kv_blocks,
                 "KV blocks (default: cuda by memory fraction, cpu what the batch needs)");
  app.add_option("--block-size", opt.block_size, "tokens per KV block")->check(CLI::PositiveNumber);
  app.add_option("--step-tokens", opt.step_tokens, "token budget of one engine step")
      ->check(CLI::PositiveNumber);
  app.add_option("--temperature", opt.temperature, "sampling temperature")
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", opt.seed, "seed of the prompts and the sampling");
  app.add_flag(
      "!--no-overlap", opt.overlap,
      "stage each decode step after the last one's samples are back (default: while it runs)");
  app.add_flag("--true-on-policy", opt.true_on_policy,
               "the trueOnPolicy mode's batch-invariant kernels (cuda bf16)");
  app.add_option("--profile", opt.profile,
                 "after the timed run, profile 8 more tokens of the batch with libtorch's profiler "
                 "(Kineto) and write its Chrome trace here");
  app.add_option("--save-prompts", opt.save_prompts,
                 "write the prompts as JSON lines {\"prompt_ids\": [...]}");
}

serving::engine_config rollout_engine_config(const rollout_options& opt, const at::Device& device) {
  serving::engine_config cfg;
  cfg.block_size = opt.block_size;
  cfg.max_tokens_per_step = opt.step_tokens;
  cfg.overlap_host = opt.overlap;
  const int64_t per_seq = (opt.prompt_len + opt.new_tokens + opt.block_size - 1) / opt.block_size;
  if (opt.kv_blocks > 0) {
    cfg.num_blocks = opt.kv_blocks;
  } else if (device.is_cuda()) {
    cfg.kv_memory_fraction = opt.kv_fraction;
  } else {
    cfg.num_blocks = per_seq * opt.batch + 16;
  }
  return cfg;
}

/// Submits n of the prompts with `new_tokens` each and steps the engine until idle; with a
/// report, writes the timings into it.
void run_rollout(serving::engine& e, const rollout_options& opt,
                 const std::vector<std::vector<int64_t>>& prompts, const at::Device& device,
                 int64_t n, int64_t new_tokens, nlohmann::json* report) {
  for (int64_t i = 0; i < n; ++i) {
    serving::generate_request r;
    r.id = uint64_t(i);
    r.prompt = prompts[i % prompts.size()];
    r.params.max_new_tokens = new_tokens;
    r.params.temperature = opt.temperature;
    r.params.seed = opt.seed + uint64_t(i);
    e.add(r);
  }
  std::vector<double> decode_ms;
  double prefill_s = 0, total = 0;
  int64_t generated = 0;
  const double start = bench_now_s();
  while (!e.idle()) {
    const auto before = e.stats();
    const double t0 = bench_now_s();
    auto done = e.step();  // ends with the sampled ids on the host: the GPU work is done
    const double dt = bench_now_s() - t0;
    const auto after = e.stats();
    if (after.prefill_tokens > before.prefill_tokens) {
      prefill_s += dt;
    } else {
      decode_ms.push_back(dt * 1e3);
    }
    for (const auto& s : done) generated += static_cast<int64_t>(s.output.size());
  }
  bench_sync(device);
  total = bench_now_s() - start;
  if (report == nullptr) return;
  auto st = e.stats();
  std::vector<double> sorted = decode_ms;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (double x : decode_ms) sum += x;
  auto& r = *report;
  r["seconds"] = total;
  r["generated_tokens"] = generated;
  r["tokens_per_s"] = double(generated) / total;
  r["steps"] = st.steps;
  r["decode_steps"] = decode_ms.size();
  r["ms_per_decode_step"] = decode_ms.empty() ? 0.0 : sum / double(decode_ms.size());
  r["ms_per_decode_step_median"] = sorted.empty() ? 0.0 : sorted[sorted.size() / 2];
  r["decode_tokens_per_s"] = sum > 0 ? double(st.decode_tokens) / (sum / 1e3) : 0.0;
  r["prefill_seconds"] = prefill_s;
  r["prefill_tokens_per_s"] = prefill_s > 0 ? double(st.prefill_tokens) / prefill_s : 0.0;
  r["preemptions"] = st.preemptions;
  if (const auto* g = e.graph_stats(); g != nullptr && g->replays + g->eager > 0) {
    // Where a graph decode step's time goes: host preparation vs the GPU's own time.
    const double timed = double(g->replays + g->eager - g->captures);
    r["graph_replays"] = g->replays;
    r["graph_captures"] = g->captures;
    r["graph_host_ms_per_step"] = timed > 0 ? g->host_ms / timed : 0.0;
    r["graph_gpu_ms_per_step"] = timed > 0 ? g->gpu_ms / timed : 0.0;
    r["graph_steps_staged_ahead"] = g->staged_ahead;
    r["graph_steps_staged_ahead_used"] = g->staged_ahead_used;
  }
}

/// The HBM floor of a decode step: reading every weight once at the bandwidth a device copy
/// reaches (bytes read + written per second), measured here in the same run.
void hbm_floor(const llm::decoder& model, const at::Device& device, nlohmann::json& out) {
  const int64_t bytes = int64_t(1) << 31;
  auto a = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(device));
  auto b = at::empty_like(a);
  b.copy_(a);
  bench_sync(device);
  const double t0 = bench_now_s();
  for (int i = 0; i < 5; ++i) b.copy_(a);
  bench_sync(device);
  const double gbps = 2.0 * double(bytes) * 5 / (bench_now_s() - t0) / 1e9;
  const double weight_bytes =
      double(model.params().buffer().numel()) * model.params().buffer().element_size();
  out["hbm_copy_gbps"] = gbps;
  out["weight_bytes"] = weight_bytes;
  out["weight_read_floor_ms"] = weight_bytes / (gbps * 1e9) * 1e3;
}

cli::exit_status bench_rollout(const rollout_options& opt, cli::context& ctx) {
  const auto target = bench_target_of(opt.device, opt.dtype, "bench rollout", ctx);
  if (!target) return cli::exit_status::bad_input;
  const auto device = target->device;
  std::string name;
  auto model = bench_model(opt.model, opt.layers, *target, name, "bench rollout", ctx);
  if (!model) return cli::exit_status::bad_input;
  if (!set_true_on_policy(*model, opt.true_on_policy, "bench rollout", ctx))
    return cli::exit_status::bad_input;
  const int64_t vocab = model->config().vocab_size;
  std::mt19937_64 rng(opt.seed);
  std::vector<std::vector<int64_t>> prompts(opt.batch);
  for (auto& p : prompts)
    for (int64_t i = 0; i < opt.prompt_len; ++i) p.push_back(int64_t(rng() % uint64_t(vocab)));
  if (!opt.save_prompts.empty()) {
    std::ofstream f(opt.save_prompts);
    for (const auto& p : prompts) f << nlohmann::json({{"prompt_ids", p}}).dump() << "\n";
    if (!f) {
      cli::print_error(ctx.err, "bench rollout", "cannot write " + opt.save_prompts);
      return cli::exit_status::bad_input;
    }
  }
  const serving::engine_config cfg = rollout_engine_config(opt, device);
  nlohmann::json out = {{"bench", "rollout"},           {"model", name},
                        {"device", opt.device},         {"dtype", opt.dtype},
                        {"batch", opt.batch},           {"prompt_len", opt.prompt_len},
                        {"new_tokens", opt.new_tokens}, {"true_on_policy", opt.true_on_policy}};
  if (device.is_cuda()) hbm_floor(*model, device, out);
  try {
    serving::engine e(*model, cfg);
    out["kv_blocks"] = e.blocks().num_blocks();
    out["kv_tokens"] = e.blocks().num_blocks() * opt.block_size;
    // Warm-up: a few sequences through prefill and decode (kernels loaded, cuBLAS handles made).
    run_rollout(e, opt, prompts, device, std::min<int64_t>(opt.batch, 4), 4, nullptr);
#ifdef MILESRT_TORCH_CUDA
    if (device.is_cuda())
      c10::cuda::CUDACachingAllocator::resetPeakStats(device.index() < 0 ? 0 : device.index());
#endif
    run_rollout(e, opt, prompts, device, opt.batch, opt.new_tokens, &out);
#ifdef MILESRT_TORCH_CUDA
    if (device.is_cuda()) {
      auto stats =
          c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
      const auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
      out["peak_gpu_allocated_mib"] = double(stats.allocated_bytes[all].peak) / (1 << 20);
      out["peak_gpu_reserved_mib"] = double(stats.reserved_bytes[all].peak) / (1 << 20);
    }
#endif
    if (!opt.profile.empty())
      bench_profile(device, opt.profile,
                    [&] { run_rollout(e, opt, prompts, device, opt.batch, 8, nullptr); });
  } catch (const std::exception& e) {
    cli::print_error(ctx.err, "bench rollout", e.what());
    return cli::exit_status::run_failed;
  }
  ctx.out << out.dump() << "\n";
  return cli::exit_status::ok;
}

}  // namespace

cli::runner define_bench_rollout(CLI::App& app, cli::context& ctx) {
  auto opt = std::make_shared<rollout_options>();
  add_rollout_options(app, *opt);
  return [opt, &ctx] { return bench_rollout(*opt, ctx); };
}

}  // namespace milesrt::app
