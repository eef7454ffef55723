#include "actors/trainer/rank_pool.hpp"

#include <ATen/Context.h>
#include <ATen/Parallel.h>

#include <stdexcept>

#include "actors/lib/dist/rendezvous.hpp"
#include "actors/lib/llm/device.hpp"
#include "actors/trainer/trainer_core.hpp"

namespace milesrt::trainer {

c10::Device rank_pool::device_of(const c10::Device& first, int rank) {
  if (!first.is_cuda()) return c10::kCPU;
  return {c10::kCUDA,
          static_cast<c10::DeviceIndex>((first.has_index() ? first.index() : 0) + rank)};
}

rank_pool::rank_pool(dist::group_options o, factory make, c10::Device device)
    : options_(std::move(o)), make_(std::move(make)), device_(device_of(device, 0)) {
  // Before any rank starts: each rank needs its own GPU (NCCL refuses two ranks on one device).
  if (device_.is_cuda()) {
    const auto last = device_of(device_, options_.world_size - 1);
    const int have = static_cast<int>(at::getNumGPUs());
    if (last.index() >= have)
      throw std::runtime_error(who(0) + ": " + last.str() +
                               " is not a device of this machine (it "
                               "has " +
                               std::to_string(have) + "); " + std::to_string(options_.world_size) +
                               " ranks on cuda need as many GPUs");
  }
  // Before any rank starts: a rank connecting to whatever holds the port could wait on it forever.
  if (dist::port_in_use(options_.host, options_.port))
    throw std::runtime_error(who(0) + ": the store's port " + std::to_string(options_.port) +
                             " on " + options_.host + " is in use (choose another port)");
  ranks_.resize(static_cast<size_t>(options_.world_size));
  for (int r = 1; r < options_.world_size; ++r) {
    ranks_[static_cast<size_t>(r)] = std::make_unique<rank_thread>();
    ranks_[static_cast<size_t>(r)]->thread = std::thread([this, r] { serve(r); });
  }
  auto mine = options_;
  mine.rank = 0;
  llm::set_current_device(device_);
  auto g = dist::make_collectives(mine, device_);
  if (!g) {
    std::string why = caf::to_string(g.error());
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      for (int r = 1; r < options_.world_size; ++r)
        if (!ranks_[static_cast<size_t>(r)]->error.empty())
          why += " (" + who(r) + ": " + ranks_[static_cast<size_t>(r)]->error + ")";
    }
    cv_.notify_all();
    for (auto& t : ranks_)
      if (t && t->thread.joinable()) t->thread.join();
    throw std::runtime_error(why);
  }
  group0_ = std::move(*g);
}

rank_pool::~rank_pool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : ranks_)
    if (t && t->thread.joinable()) t->thread.join();
}

std::string rank_pool::who(int rank) const {
  auto o = options_;
  o.rank = rank;
  return dist::describe_rank(o);
}

void rank_pool::serve(int rank) {
  auto& me = *ranks_[static_cast<size_t>(rank)];
  at::set_num_threads(1);  // one intra-op thread a rank
  std::unique_ptr<dist::collectives> group;
  std::unique_ptr<policy_trainer> trainer;
  uint64_t seen = 0;
  auto fail = [&](const std::string& why) {
    // Its trainer and group go first: with Gloo, closing the group's connections makes the other
    // ranks' collectives fail now rather than at their timeout (NCCL tells no peer: they wait
    // for rankTimeoutSeconds).
    trainer.reset();
    group.reset();
    std::lock_guard<std::mutex> lock(mu_);
    me.error = why;
    me.dead = true;
    cv_.notify_all();
  };
  try {
    auto o = options_;
    o.rank = rank;
    const auto device = device_of(device_, rank);
    llm::set_current_device(device);  // this thread's kernels go to its own device's streams
    auto g = dist::make_collectives(o, device);
    if (!g) return fail(caf::to_string(g.error()));
    group = std::move(*g);
    trainer = make_(rank, *group);
  } catch (const std::exception& e) {
    return fail(std::string("could not start: ") + e.what());
  }
  for (;;) {
    const std::function<void(policy_trainer&)>* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || generation_ > seen; });
      if (stop_) break;
      seen = generation_;
      job = job_;
    }
    try {
      (*job)(*trainer);
    } catch (const std::exception& e) {
      return fail(e.what());
    }
    std::lock_guard<std::mutex> lock(mu_);
    me.done = seen;
    cv_.notify_all();
  }
  trainer.reset();
  group.reset();
  std::lock_guard<std::mutex> lock(mu_);
  me.dead = true;
}

void rank_pool::run(const std::function<void(policy_trainer&)>& job,
                    const std::function<void()>& own) {
  uint64_t gen = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int r = 1; r < options_.world_size && broken_.empty(); ++r) {
      const auto& t = *ranks_[static_cast<size_t>(r)];
      if (t.dead) broken_ = who(r) + " is gone: " + t.error;
    }
    if (!broken_.empty()) throw std::runtime_error("the data-parallel group is broken: " + broken_);
    job_ = &job;
    gen = ++generation_;
  }
  cv_.notify_all();
  std::string own_error;
  try {
    own();
  } catch (const std::exception& e) {
    own_error = e.what();
  }
  std::unique_lock<std::mutex> lock(mu_);
  // The other ranks finish their part, or fail (a collective rank 0 left fails at its timeout).
  cv_.wait(lock, [&] {
    for (int r = 1; r < options_.world_size; ++r) {
      const auto& t = *ranks_[static_cast<size_t>(r)];
      if (t.done < gen && !t.dead) return false;
    }
    return true;
  });
  job_ = nullptr;
  // A rank that died is the cause; rank 0's own failure (often a collective the dead rank left)
  // is named only when no other rank failed.
  for (int r = 1; r < options_.world_size; ++r) {
    const auto& t = *ranks_[static_cast<size_t>(r)];
    if (t.dead) {
      broken_ = who(r) + " died mid-step: " + t.error;
      throw std::runtime_error(broken_ +
                               (own_error.empty() ? "" : " (rank 0 then: " + own_error + ")"));
    }
  }
  if (!own_error.empty()) {
    broken_ = who(0) + " failed: " + own_error;
    throw std::runtime_error(own_error);
  }
}

}  // namespace milesrt::trainer
