#pragma once
/// The ipc transport on the GPU: CUDA IPC memory handles. With handover = share (the sync
/// schedule) the update names the trainer's own buffer (the IPC handle of the allocation holding
/// it, and its offset there): nothing is copied on the trainer's side, and the buffer is valid
/// until the trainer's next step, as with colocated share. Otherwise the publishing process keeps
/// a ring of device buffers (cudaMalloc) and copies each version into the next one, waiting for
/// the copy before it answers. An engine in another process on the same machine opens the handle
/// (once per allocation), copies device to device into its own flat buffer (waiting for the
/// copy), and verifies the hashes the update carries. A ring version is overwritten `slots`
/// publishes later: engines must apply it before then (the sync schedule always does; async with
/// maxStaleness < slots - 1).
/// Compiled only with CUDA (CMake then defines MILESRT_HAVE_CUDA_IPC).

#ifdef MILESRT_HAVE_CUDA_IPC

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "actors/lib/llm/model.hpp"
#include "actors/lib/weights/transport.hpp"

namespace milesrt::weights {

/// A CUDA IPC transfer failed; the message names the call, file, line and CUDA's error string.
struct cuda_ipc_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class cuda_ipc_publisher {
 public:
  /// A ring of `slots` device buffers of `bytes` each on `device`.
  cuda_ipc_publisher(size_t bytes, int device, int slots = 3);
  ~cuda_ipc_publisher();
  cuda_ipc_publisher(const cuda_ipc_publisher&) = delete;
  cuda_ipc_publisher& operator=(const cuda_ipc_publisher&) = delete;
  /// Copies `p`'s buffer (on this device) into the next buffer of the ring and returns the
  /// location for the update: "cuda-ipc:<bytes>:<hex of the IPC handle>:0".
  std::string publish(const llm::flat_params& p);
  /// The location of `p`'s buffer itself, nothing copied: "cuda-ipc:<bytes>:<hex of the IPC
  /// handle of the allocation holding it>:<offset in it>". Needs the buffer to come from
  /// libtorch's caching allocator (not from its expandable segments); throws otherwise.
  static std::string share(const llm::flat_params& p);

 private:
  size_t bytes_;
  int device_;
  std::vector<void*> buffers_;
  std::vector<std::string> handles_;  ///< hex, per buffer
  size_t next_ = 0;
};

class cuda_ipc_receiver {
 public:
  cuda_ipc_receiver() = default;
  ~cuda_ipc_receiver();
  cuda_ipc_receiver(const cuda_ipc_receiver&) = delete;
  cuda_ipc_receiver& operator=(const cuda_ipc_receiver&) = delete;
  /// Copies the buffer at `location` (from cuda_ipc_publisher::publish, in another process) into
  /// `p`'s buffer, which must be on a CUDA device and have the same byte count.
  void apply(llm::flat_params& p, const std::string& location);

 private:
  std::map<std::string, void*> opened_;  ///< hex handle -> mapped device pointer
};

/// The ipc transport for weights on a GPU (the factory picks it when the trainer's weights are on
/// CUDA; engines by the "cuda-ipc:" location). The update's transport name stays "ipc".
class cuda_ipc_transport final : public transport {
 public:
  const char* name() const override { return "ipc"; }
  bool publish(const published_version& v, weights_update& u) override;
  apply_result apply(llm::decoder& model, const weights_update& u,
                     const apply_context& ctx) override;
  bool serves(const weights_update& u) const override;

 private:
  std::unique_ptr<cuda_ipc_publisher> ring_;     ///< the publisher's side
  std::unique_ptr<cuda_ipc_receiver> receiver_;  ///< an engine's side
};

}  // namespace milesrt::weights

#endif
