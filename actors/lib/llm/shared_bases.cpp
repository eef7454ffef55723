#include "actors/lib/llm/shared_bases.hpp"

#include <ATen/ATen.h>

namespace milesrt::llm {
namespace fs = std::filesystem;

std::unique_ptr<decoder> shared_bases::load(const fs::path& dir, at::ScalarType dtype,
                                            at::Device device, bool* shared) {
  std::error_code ec;
  auto canonical = fs::weakly_canonical(dir, ec);
  const std::string key =
      (ec ? dir : canonical).string() + "|" + c10::toString(dtype) + "|" + device.str();
  // Under the lock: two actors spawning at once load the folder once.
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto base = bases_[key].lock()) {
    if (shared) *shared = true;
    return decoder::with_params(dir, std::move(base));
  }
  auto model = decoder::load(dir, dtype, device);
  bases_[key] = model->shared_params();
  if (shared) *shared = false;
  return model;
}

}  // namespace milesrt::llm
