#pragma once
/// The engine side of weight publishing: applies a weights_update to a model through the
/// transport it names (transport.hpp), and verifies it.

#include <cstdint>
#include <memory>

#include "actors/lib/llm/model.hpp"
#include "actors/lib/weights/messages.hpp"

namespace milesrt::weights {

class local_versions;
class transport;

class receiver {
 public:
  receiver();
  ~receiver();
  receiver(receiver&&) noexcept;
  receiver& operator=(receiver&&) noexcept;
  /// Brings `model` to version u.version; `local` is this process's local_versions (colocated
  /// publishing finds the trainer's weights there). Throws naming the transport and what is
  /// wrong. disk_delta and ipc verify what they read before writing into the model, so a corrupt
  /// delta or a torn copy leaves the weights as they were (disk_delta then asks the publisher for
  /// a full copy). The end-to-end hash check (verifyWeights) runs after the copy: when it fails
  /// the weights are already overwritten, version() keeps the old number, and the error stops the
  /// run.
  void apply(llm::decoder& model, const weights_update& u, local_versions& local);
  /// broadcast / p2p: this engine's NCCL rank (its replica + 1; the trainer is rank 0).
  void set_rank(int rank) { rank_ = rank; }
  /// The version the model holds (0 = as loaded).
  uint64_t version() const { return version_; }
  /// Full copies fetched after a delta could not be applied.
  uint64_t full_copies() const { return full_copies_; }

 private:
  uint64_t version_ = 0;
  uint64_t full_copies_ = 0;
  int rank_ = 1;
  std::unique_ptr<transport>
      transport_;  ///< kept while updates keep to it (its state: delta base, NCCL)
};

}  // namespace milesrt::weights
