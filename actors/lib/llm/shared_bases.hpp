#pragma once
/// Frozen base models of one process by folder (LoRA, docs/lora.md): a LoRA trainer's base, a
/// LoRA engine's base and a reference model of the same folder, dtype and device share one copy of
/// the parameters instead of loading one each. Only actors that never write their parameters
/// load through here (a trainer without LoRA, or an engine serving merged adapters, do not). One
/// object per process, taken from the process store: `store.get_or_make<llm::shared_bases>()`.

#include <ATen/core/Tensor.h>

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "actors/lib/llm/model.hpp"

namespace milesrt::llm {

class shared_bases {
 public:
  /// The model of `dir` in `dtype` on `device`, on the parameters another actor of the process
  /// loaded from the same folder (as long as one still holds them), else loaded now (and offered
  /// to the next). `shared`, when given, says which it was. Throws as decoder::load.
  std::unique_ptr<decoder> load(const std::filesystem::path& dir, at::ScalarType dtype,
                                at::Device device, bool* shared = nullptr);

 private:
  std::mutex mutex_;
  std::map<std::string, std::weak_ptr<flat_params>> bases_;  ///< by folder, dtype and device
};

}  // namespace milesrt::llm
