#pragma once
/// The ranks of a data-parallel trainer (trainer param dataParallel = N) as threads of one
/// process: rank 0 is the trainer actor's own thread, ranks 1 .. N-1 are threads of this pool, each
/// with its own model, optimizer and one intra-op thread (and, on GPUs, its own device), meeting
/// through a c10d TCP store (rendezvous.hpp) and summing gradients through Gloo on the CPU or NCCL
/// on GPUs (data_parallel.hpp).
///
/// A step runs a job on every rank at once (run()); when one fails, the step ends with an error
/// that names the rank, and the pool stays broken (a rank that died cannot rejoin a formed Gloo
/// group): later steps fail at once, and the run's supervision resumes from the last checkpoint.

#include <c10/core/Device.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "actors/lib/dist/collectives.hpp"

namespace milesrt::trainer {

class policy_trainer;

class rank_pool {
 public:
  /// Builds one rank's trainer, on its own thread, once the group has formed; `group` outlives it.
  using factory =
      std::function<std::unique_ptr<policy_trainer>(int rank, dist::collectives& group)>;

  /// Starts ranks 1 .. o.world_size - 1 and joins the group as rank 0 on the calling thread (o.rank
  /// is ignored). On the CPU the ranks sum through Gloo; on CUDA rank r runs on the device r places
  /// after rank 0's (`device`) and the ranks sum through NCCL. Throws std::runtime_error naming
  /// the rank that did not join within o.join_timeout (and its own reason, when its thread knows
  /// it).
  rank_pool(dist::group_options o, factory make, c10::Device device = c10::kCPU);

  /// The device of rank `rank` when rank 0's is `first`: the CPU, or the CUDA device `rank` places
  /// after `first`'s.
  static c10::Device device_of(const c10::Device& first, int rank);
  ~rank_pool();
  rank_pool(const rank_pool&) = delete;
  rank_pool& operator=(const rank_pool&) = delete;

  /// Rank 0's collectives (its trainer's trainer_options::group).
  dist::collectives& group() { return *group0_; }
  int world_size() const { return options_.world_size; }

  /// Runs `job` on every other rank's trainer while `own` (rank 0's part) runs here, and returns
  /// once all are done. Throws std::runtime_error naming the rank that failed first ("rank 1 of 2
  /// ...: <its error>") when any did; a rank that had failed before fails the call at once.
  void run(const std::function<void(policy_trainer&)>& job, const std::function<void()>& own);

 private:
  struct rank_thread {
    std::thread thread;
    std::string error;  ///< why this rank failed ("" while it is fine)
    uint64_t done = 0;  ///< the last job it finished
    bool dead = false;  ///< its thread ended (failed, or the pool stopped)
  };
  void serve(int rank);
  /// "rank R of N (store host:port)".
  std::string who(int rank) const;

  dist::group_options options_;
  factory make_;
  c10::Device device_;
  std::unique_ptr<dist::collectives> group0_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<rank_thread>> ranks_;  ///< [0] unused: rank 0 is the caller
  const std::function<void(policy_trainer&)>* job_ = nullptr;
  uint64_t generation_ = 0;  ///< the job now posted
  bool stop_ = false;
  std::string broken_;  ///< why the pool no longer runs steps
};

}  // namespace milesrt::trainer
