// `milesrt bench publish --gpus N`: a version of the weights moved from the trainer's GPU (rank 0,
// cuda:0) to engines on cuda:1 .. cuda:N-1 through the publisher's NCCL transports (broadcast,
// and p2p with the whole-model plan), timed beside a peer copy of the same bytes from cuda:0 to
// cuda:1 (libtorch's device-to-device copy): the GPU-to-GPU bandwidth they are judged against.
// Each rank is a thread of this process on its own device.

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "actors/lib/weights/nccl_broadcast.hpp"
#include "actors/lib/weights/transfer_plan.hpp"
#include "app/bench/bench.hpp"

namespace milesrt::app {

#ifdef MILESRT_HAVE_NCCL
namespace {

/// The ranks meet here before and after each timed transfer.
class step_barrier {
 public:
  explicit step_barrier(int n) : n_(n) {}
  /// Throws once a rank has broken the barrier (it failed: the others stop waiting for it).
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t gen = generation_;
    if (broken_) throw std::runtime_error("another rank failed");
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != gen || broken_; });
    if (broken_) throw std::runtime_error("another rank failed");
  }
  void do_break() {
    std::lock_guard<std::mutex> lock(mu_);
    broken_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_, arrived_ = 0;
  uint64_t generation_ = 0;
  bool broken_ = false;
};

/// Milliseconds a transfer takes, the mean of `steps` after one warm-up: every rank
/// runs `move(rank)` between two barriers; rank 0's clock.
double time_ranks(int gpus, int64_t steps, const std::function<void(int)>& move) {
  step_barrier barrier(gpus);
  double total = 0;
  std::vector<std::string> errors(static_cast<size_t>(gpus));
  std::vector<std::thread> threads;
  for (int r = 0; r < gpus; ++r) {
    threads.emplace_back([&, r] {
      try {
        for (int64_t k = 0; k <= steps; ++k) {
          barrier.wait();
          const double t0 = bench_now_s();
          move(r);
          barrier.wait();
          if (r == 0 && k > 0) total += bench_now_s() - t0;
        }
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
        barrier.do_break();  // a rank inside NCCL still waits for it: NCCL's own timeout then
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < gpus; ++r)
    if (!errors[static_cast<size_t>(r)].empty())
      throw std::runtime_error("rank " + std::to_string(r) + ": " + errors[static_cast<size_t>(r)]);
  return total / double(steps) * 1e3;
}

}  // namespace

void multi_gpu_publish_rows(const llm::flat_params& trainer, int gpus, int64_t steps,
                            nlohmann::json& out) {
  if (gpus < 2 || at::getNumGPUs() < static_cast<size_t>(gpus))
    throw std::invalid_argument("--gpus " + std::to_string(gpus) + ": this machine has " +
                                std::to_string(at::getNumGPUs()) + " GPU(s); at least 2 needed");
  at::NoGradGuard no_grad;
  const auto& src = trainer.buffer();
  const double bytes = double(src.numel()) * double(src.element_size());
  // Every rank's copy of the model: rank 0's the trainer's own, the others on their devices.
  std::vector<std::shared_ptr<llm::flat_params>> ranks(static_cast<size_t>(gpus));
  for (int r = 1; r < gpus; ++r)
    ranks[static_cast<size_t>(r)] =
        trainer.copy(src.scalar_type(), at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(r)));
  auto own = [&](int r) -> llm::flat_params& {
    return r == 0 ? const_cast<llm::flat_params&>(trainer) : *ranks[static_cast<size_t>(r)];
  };
  // The bandwidth they are judged against: libtorch's copy from cuda:0 to cuda:1.
  auto dst = at::empty_like(src, src.options().device(at::kCUDA, 1));
  const double peer_ms = time_ranks(1, steps, [&](int) {
    dst.copy_(src);
    bench_sync(src.device());
    bench_sync(dst.device());
  });
  dst = at::Tensor();
  // One communicator per transport, every rank joining at once (as engines join a publisher).
  std::vector<std::unique_ptr<weights::nccl_broadcaster>> comms(static_cast<size_t>(gpus));
  auto join = [&] {
    const auto id = weights::nccl_broadcaster::make_id();
    std::vector<std::string> errors(static_cast<size_t>(gpus));
    std::vector<std::thread> threads;
    for (int r = 0; r < gpus; ++r)
      threads.emplace_back([&, r] {
        try {
          comms[static_cast<size_t>(r)] =
              std::make_unique<weights::nccl_broadcaster>(id, gpus, r, r);
        } catch (const std::exception& e) {
          errors[static_cast<size_t>(r)] = e.what();
        }
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < gpus; ++r)
      if (!errors[static_cast<size_t>(r)].empty())
        throw std::runtime_error("rank " + std::to_string(r) +
                                 " could not join NCCL: " + errors[static_cast<size_t>(r)]);
  };
  join();
  const double broadcast_ms =
      time_ranks(gpus, steps, [&](int r) { comms[static_cast<size_t>(r)]->broadcast(own(r), 0); });
  const auto plan = weights::plan_whole_model(trainer.element_counts(), gpus - 1);
  const double p2p_ms = time_ranks(
      gpus, steps, [&](int r) { comms[static_cast<size_t>(r)]->run_plan(own(r), plan); });
  comms.clear();
  auto gb_s = [&](double ms) { return bytes / (ms * 1e-3) / 1e9; };
  out["gpus"] = gpus;
  out["peer_copy_ms"] = peer_ms;
  out["peer_copy_gb_s"] = gb_s(peer_ms);
  out["nccl_broadcast_ms"] = broadcast_ms;
  out["nccl_broadcast_gb_s"] = gb_s(broadcast_ms);
  out["nccl_broadcast_over_peer_copy"] = gb_s(broadcast_ms) / gb_s(peer_ms);
  out["nccl_p2p_ms"] = p2p_ms;
  out["nccl_p2p_gb_s"] = gb_s(p2p_ms);
  out["nccl_p2p_over_peer_copy"] = gb_s(p2p_ms) / gb_s(peer_ms);
}

#else

void multi_gpu_publish_rows(const llm::flat_params&, int, int64_t, nlohmann::json&) {
  throw std::invalid_argument("--gpus: this build has no NCCL (built without CUDA or NCCL)");
}

#endif

}  // namespace milesrt::app
