// `milesrt bench publish`: handing a trainer's version of the weights to a rollout engine, through
// the transports the publisher kind uses (actors/lib/weights), timed beside a device-to-device copy
// of the same bytes in the same process:
//   colocated, handover = share (the sync graphs): the engine adopts the trainer's own buffer;
//   colocated, handover = copy (the async graphs): the trainer's process freezes one copy of the
//     version (local_versions::announce) and the engine adopts it;
//   ipc (CUDA IPC) to an engine in another process on the same GPU: this process spawns itself as
//     the receiver (`--receiver`, which loads the same model as an engine would), publishes (share:
//     the handle of the trainer's own buffer; copy: a copy in the publisher's IPC ring) and tells
//     the receiver where over a pipe; the receiver opens the handle and copies into its own
//     buffer, then answers. Timed from publish to the receiver's answer.
// Hashes (xxh3 per tensor, the update's verifyWeights) are timed on their own: the trainer's side
// (hashing its buffer) and the receiver's (verifying what it received against them).
// One JSON line out.

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "actors/lib/llm/lora.hpp"
#include "actors/lib/llm/model.hpp"
#include "actors/lib/weights/local_versions.hpp"
#include "actors/lib/weights/tensor_hash.hpp"
#include "actors/lib/weights/transport.hpp"
#include "app/bench/bench.hpp"

extern char** environ;

namespace milesrt::app {
namespace {

using Transport = schema::PublisherParams::Transport;

std::string join(const std::vector<uint64_t>& v) {
  std::ostringstream s;
  for (size_t i = 0; i < v.size(); ++i) s << (i ? "," : "") << v[i];
  return s.str();
}

std::vector<uint64_t> split(const std::string& s) {
  std::vector<uint64_t> v;
  std::istringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) v.push_back(std::stoull(item));
  return v;
}

/// The receiving engine's side: one line in ("apply <version> <location> <hashes or ->" or "quit");
/// out: "applied <apply ms>", then with hashes "verified <verify ms>" (or "error <what>").
int run_receiver(llm::decoder& engine) {
  std::unique_ptr<weights::transport> t;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string what;
    in >> what;
    if (what == "quit") break;
    weights::weights_update u;
    std::string hashes;
    in >> u.version >> u.location >> hashes;
    u.transport = "ipc";
    try {
      if (!t || !t->serves(u)) t = weights::make_transport(u);
      const double t0 = bench_now_s();
      t->apply(engine, u, {});
      bench_sync(engine.device());
      const double t1 = bench_now_s();
      std::cout << "applied " << (t1 - t0) * 1e3 << std::endl;
      if (hashes != "-") {  // verified after answering: the publisher times the hand-over alone
        weights::verify_weights(engine.published(), split(hashes));
        std::cout << "verified " << (bench_now_s() - t1) * 1e3 << std::endl;
      }
    } catch (const std::exception& e) {
      std::cout << "error " << e.what() << std::endl;
    }
  }
  return 0;
}

/// A copy of this program as the receiver, its stdin and stdout on pipes.
struct receiver_process {
  pid_t pid = -1;
  FILE* to = nullptr;
  FILE* from = nullptr;

  receiver_process(const std::vector<std::string>& args) {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, in[1]);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const int rc = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    if (rc != 0)
      throw std::runtime_error("could not start the receiving process: " +
                               std::string(strerror(rc)));
    to = fdopen(in[1], "w");
    from = fdopen(out[0], "r");
  }
  ~receiver_process() {
    if (to) {
      std::fputs("quit\n", to);
      std::fclose(to);
    }
    if (from) std::fclose(from);
    if (pid > 0) waitpid(pid, nullptr, 0);
  }
  /// Sends one line and returns the answer (throws when the receiver is gone).
  std::string ask(const std::string& line) {
    std::fputs((line + "\n").c_str(), to);
    std::fflush(to);
    return read();
  }
  /// The next line the receiver writes.
  std::string read() {
    char buf[4096];
    if (!std::fgets(buf, sizeof buf, from)) throw std::runtime_error("the receiving process ended");
    return buf;
  }
};

struct publish_options {
  std::string model, device = "cuda", dtype = "bf16";
  int64_t layers = 0, steps = 5, lora_rank = 0, gpus = 1;
  bool receiver = false, ipc = true;
};

/// One run of the benchmark: the trainer's weights, an engine, and the rows timed on them.
struct publish_bench {
  const publish_options& opt;
  at::Device dev;
  std::shared_ptr<llm::flat_params> trainer;
  std::unique_ptr<llm::decoder> engine;
  std::vector<uint64_t> hashes;
  uint64_t version = 0;

  /// Mean ms of fn over opt.steps calls after one warm-up call; fn gets the version number.
  template <class Fn>
  double time_of(Fn&& fn) {
    fn(++version);
    bench_sync(dev);
    const double t0 = bench_now_s();
    for (int64_t i = 0; i < opt.steps; ++i) fn(++version);
    bench_sync(dev);
    return (bench_now_s() - t0) / double(opt.steps) * 1e3;
  }

  /// The colocated transport, handover share or copy; verify_ms (when given): the engine's
  /// verification of what it adopted, timed apart.
  double colocated(bool copy, double* verify_ms) {
    weights::local_versions local;
    local.add_trainer("trainer", trainer);
    if (copy) local.keep_copies(2);
    auto pub = weights::make_transport(Transport::COLOCATED, dev, {});
    std::unique_ptr<weights::transport> eng;
    const double ms = time_of([&](uint64_t v) {
      local.announce("trainer", v);
      weights::published_version pv;
      pv.version = v;
      pv.frozen = copy;
      pv.weights = copy ? local.frozen("trainer", v) : trainer;
      weights::weights_update u;
      u.version = v;
      u.channel = "trainer";
      u.transport = pub->name();
      pub->publish(pv, u);
      if (!eng) eng = weights::make_transport(u);
      weights::apply_context c;
      c.local = &local;
      c.have = v - 1;
      eng->apply(*engine, u, c);
      bench_sync(dev);
      if (engine->shared_published() != pv.weights)
        throw std::logic_error("bench publish: the engine did not adopt the published buffer");
    });
    if (verify_ms != nullptr) {
      const double t0 = bench_now_s();
      weights::verify_weights(engine->published(), hashes);
      *verify_ms = (bench_now_s() - t0) * 1e3;
    }
    return ms;
  }

  /// The CUDA IPC rows: an engine in a second process on the same GPU.
  void ipc_rows(double copy_ms, nlohmann::json& out) {
    engine.reset();  // the receiver loads its own
    std::vector<std::string> args = {"milesrt",  "bench",    "publish", "--receiver",
                                     "--device", opt.device, "--dtype", opt.dtype};
    if (!opt.model.empty()) args.insert(args.end(), {"--model", opt.model});
    if (opt.layers > 0) args.insert(args.end(), {"--layers", std::to_string(opt.layers)});
    if (opt.lora_rank > 0) args.insert(args.end(), {"--lora-rank", std::to_string(opt.lora_rank)});
    receiver_process rx(args);
    auto pub = weights::make_transport(Transport::IPC, dev, {});
    const std::string hash_list = join(hashes);
    // handover = share: the receiver copies out of the trainer's own buffer; copy: the
    // publisher first copies the version into its IPC ring (as it does for a frozen copy).
    auto apply = [&](uint64_t v, bool ring, bool verify, double* receiver_ms) {
      weights::published_version pv;
      pv.version = v;
      pv.weights = trainer;
      pv.frozen = ring;
      weights::weights_update u;
      u.version = v;
      u.transport = pub->name();
      pub->publish(pv, u);
      const auto answer = rx.ask("apply " + std::to_string(v) + " " + u.location + " " +
                                 (verify ? hash_list : "-"));
      std::istringstream in(answer);
      std::string what;
      double ms = 0;
      in >> what >> ms;
      if (what != "applied") throw std::runtime_error("the receiving engine: " + answer);
      if (receiver_ms) *receiver_ms += ms;
    };
    for (bool ring : {false, true}) {
      const std::string key = ring ? "cuda_ipc_ring" : "cuda_ipc_share";
      // The first version from each allocation (each buffer of the ring) makes the receiver
      // open its IPC handle (mapping it): timed apart from the steady state.
      const int firsts = ring ? 3 : 1;
      const double t_first = bench_now_s();
      for (int i = 0; i < firsts; ++i) apply(++version, ring, false, nullptr);
      out[key + "_first_versions_ms"] = (bench_now_s() - t_first) * 1e3 / firsts;
      double rx_apply = 0;
      const double ms = time_of([&](uint64_t v) { apply(v, ring, false, &rx_apply); });
      out[key + "_ms"] = ms;
      out[key + "_over_copy"] = ms / copy_ms;
      out[key + "_receiver_apply_ms"] = rx_apply / double(opt.steps + 1);  // with the warm-up
    }
    apply(++version, false, true, nullptr);
    const auto verified = rx.read();
    std::istringstream vin(verified);
    std::string what;
    double rx_verify = 0;
    vin >> what >> rx_verify;
    if (what != "verified") throw std::runtime_error("the receiving engine: " + verified);
    out["verify_receiver_ms"] = rx_verify;
  }
};

cli::exit_status bench_publish(const publish_options& opt, cli::context& ctx) {
  const auto target = bench_target_of(opt.device, opt.dtype, "bench publish", ctx);
  if (!target) return cli::exit_status::bad_input;
  if (opt.gpus > 1 && (!target->device.is_cuda() || int64_t(at::getNumGPUs()) < opt.gpus)) {
    cli::print_error(ctx.err, "bench publish",
                     "--gpus " + std::to_string(opt.gpus) + " needs --device cuda and " +
                         std::to_string(opt.gpus) + " GPUs; this machine has " +
                         std::to_string(at::getNumGPUs()));
    return cli::exit_status::bad_input;
  }
  std::string name;
  auto trainer_model = bench_model(opt.model, opt.layers, *target, name, "bench publish", ctx);
  if (!trainer_model) return cli::exit_status::bad_input;
  // LoRA: what is published is the adapters alone (both sides start from the same seed).
  if (opt.lora_rank > 0) attach_bench_adapters(*trainer_model, opt.lora_rank);
  if (opt.receiver)
    return run_receiver(*trainer_model) == 0 ? cli::exit_status::ok : cli::exit_status::run_failed;
  at::NoGradGuard no_grad;
  publish_bench b{opt, target->device, trainer_model->shared_published(), nullptr, {}, 0};
  const auto& buf = b.trainer->buffer();
  const double bytes = double(buf.numel()) * double(buf.element_size());
  b.engine = bench_model(opt.model, opt.layers, *target, name, "bench publish", ctx);
  if (!b.engine) return cli::exit_status::bad_input;
  if (opt.lora_rank > 0) attach_bench_adapters(*b.engine, opt.lora_rank);

  auto dst = at::empty_like(buf);
  const double copy_ms = b.time_of([&](uint64_t) { dst.copy_(buf); });
  dst = at::Tensor();

  const double t_hash = bench_now_s();
  b.hashes = weights::param_hashes(*b.trainer);
  const double hash_ms = (bench_now_s() - t_hash) * 1e3;

  nlohmann::json out = {{"bench", "publish"},
                        {"model", name},
                        {"device", opt.device},
                        {"dtype", opt.dtype},
                        {"lora_rank", opt.lora_rank},
                        {"bytes_gb", bytes / 1e9},
                        {"parameters", b.trainer->buffer().numel()},
                        {"tensors", b.trainer->names().size()},
                        {"copy_ms", copy_ms},
                        {"copy_tb_s", 2 * bytes / (copy_ms * 1e-3) / 1e12},
                        {"hash_trainer_ms", hash_ms}};
  try {
    double verify_copy = 0;
    const double share_ms = b.colocated(false, nullptr);
    const double copy_handover_ms = b.colocated(true, &verify_copy);
    out["colocated_share_ms"] = share_ms;
    out["colocated_copy_ms"] = copy_handover_ms;
    out["colocated_copy_over_copy"] = copy_handover_ms / copy_ms;
    out["verify_engine_ms"] = verify_copy;
    if (opt.ipc && b.dev.is_cuda()) b.ipc_rows(copy_ms, out);
    if (opt.gpus > 1)
      multi_gpu_publish_rows(*b.trainer, static_cast<int>(opt.gpus), opt.steps, out);
  } catch (const std::exception& e) {
    cli::print_error(ctx.err, "bench publish", e.what());
    return cli::exit_status::run_failed;
  }
  ctx.out << out.dump() << std::endl;
  return cli::exit_status::ok;
}

}  // namespace

cli::runner define_bench_publish(CLI::App& app, cli::context& ctx) {
  auto opt = std::make_shared<publish_options>();
  app.add_option(
      "--model", opt->model,
      "a Hugging Face model folder (default: Qwen3-0.6B's architecture, random weights)");
  app.add_option("--layers", opt->layers, "keep only this many layers of the model");
  app.add_option("--device", opt->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--dtype", opt->dtype, "fp32 or bf16")->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--steps", opt->steps, "timed versions per way (after one warm-up version)")
      ->check(CLI::PositiveNumber);
  app.add_option("--lora-rank", opt->lora_rank,
                 "publish LoRA adapters of this rank (alpha 2 x rank) on every projection instead "
                 "of the whole model, as a LoRA trainer does; 0 = the whole model")
      ->check(CLI::Range(int64_t{0}, llm::lora_limits::max_rank));
  app.add_flag("!--no-ipc", opt->ipc, "leave out the CUDA IPC row (no second process)");
  app.add_option("--gpus", opt->gpus,
                 "with N >= 2 GPUs: also NCCL broadcast and p2p from cuda:0 to copies on cuda:1 .. "
                 "cuda:N-1, beside a peer copy cuda:0 -> cuda:1 (the bandwidth they are judged by)")
      ->check(CLI::Range(int64_t{1}, int64_t{64}));
  app.add_flag("--receiver", opt->receiver, "internal: be the receiving engine of the ipc row")
      ->group("");
  return [opt, &ctx] { return bench_publish(*opt, ctx); };
}

}  // namespace milesrt::app
