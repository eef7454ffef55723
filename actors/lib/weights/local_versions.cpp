#include "actors/lib/weights/local_versions.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>

namespace milesrt::weights {

void local_versions::add_trainer(const std::string& trainer,
                                 std::shared_ptr<llm::flat_params> live) {
  std::lock_guard<std::mutex> lock(mutex_);
  trainers_[trainer].live = std::move(live);
}

void local_versions::keep_copies(uint32_t keep) {
  std::lock_guard<std::mutex> lock(mutex_);
  keep_ = std::max({keep_, keep, 1u});
}

weights_ref local_versions::announce(const std::string& trainer, uint64_t version) {
  std::shared_ptr<llm::flat_params> live;
  uint32_t keep = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = trainers_.find(trainer);
    if (it == trainers_.end() || !it->second.live) {
      throw std::runtime_error("trainer '" + trainer + "' announced version " +
                               std::to_string(version) +
                               " but never registered its weights in this process");
    }
    live = it->second.live;
    keep = keep_;
  }
  std::shared_ptr<llm::flat_params> copy;
  if (keep > 0) {
    // Outside the lock: engines and publishers may look up other versions meanwhile. Nothing
    // changes `live` now, since its trainer is the caller.
    at::NoGradGuard no_grad;
    try {
      copy = live->copy(live->buffer().scalar_type(), live->buffer().device());
    } catch (const std::exception& e) {
      throw std::runtime_error("trainer '" + trainer + "': copy of version " +
                               std::to_string(version) + ": " + e.what());
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto& t = trainers_[trainer];
  t.latest = version;
  if (copy) {
    t.frozen[version] = std::move(copy);
    while (t.frozen.size() > keep_) t.frozen.erase(t.frozen.begin());
  }
  weights_ref ref;
  ref.version = version;
  ref.channel = trainer;
  ref.pid = static_cast<int64_t>(::getpid());
  return ref;
}

std::shared_ptr<llm::flat_params> local_versions::live(const std::string& trainer) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = trainers_.find(trainer);
  return it == trainers_.end() ? nullptr : it->second.live;
}

std::shared_ptr<llm::flat_params> local_versions::frozen(const std::string& trainer,
                                                         uint64_t version) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = trainers_.find(trainer);
  if (it == trainers_.end()) return nullptr;
  auto f = it->second.frozen.find(version);
  return f == it->second.frozen.end() ? nullptr : f->second;
}

uint64_t local_versions::latest(const std::string& trainer) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = trainers_.find(trainer);
  return it == trainers_.end() ? 0 : it->second.latest;
}

uint32_t local_versions::copies_kept() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return keep_;
}

std::string local_versions::kept_range(const std::string& trainer) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = trainers_.find(trainer);
  if (it == trainers_.end() || it->second.frozen.empty()) return "none";
  const auto& f = it->second.frozen;
  return std::to_string(f.begin()->first) + ".." + std::to_string(f.rbegin()->first);
}

}  // namespace milesrt::weights
