#pragma once
/// The ipc transport on the CPU (ipc_transport; CUDA IPC for weights on a GPU is cuda_ipc.hpp): a
/// trainer process writes each version of the flat parameter buffer into a POSIX shared-memory
/// segment, and engine processes on the same host copy it out.
///
/// Segment layout: a header of shm_header_bytes (magic, a seqlock counter that is odd while a
/// version is being written, the version, its byte count and the xxh3-64 of the payload), then the
/// payload, the flat buffer's bytes. A reader copies the payload out and keeps the copy only when
/// the counter was even and unchanged across it, and the checksum matches: it never applies a
/// torn copy. One publisher per segment.

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "actors/lib/llm/model.hpp"
#include "actors/lib/weights/transport.hpp"

namespace milesrt::weights {

/// Bytes before the payload in a segment.
constexpr size_t shm_header_bytes = 4096;

/// A shared-memory transfer failed (no segment, timeout, checksum or size mismatch); the message
/// names the segment.
struct shm_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Owns a segment (created at construction, replacing a stale one of the same name; unlinked at
/// destruction) and writes versions into it.
class shm_publisher {
 public:
  /// Creates segment `name` ("/x" or "x") with room for `bytes` of payload.
  shm_publisher(std::string name, size_t bytes);
  ~shm_publisher();
  shm_publisher(const shm_publisher&) = delete;
  shm_publisher& operator=(const shm_publisher&) = delete;

  /// Writes `p`'s buffer (any device) as `version`; throws shm_error when it does not fit.
  void publish(const llm::flat_params& p, uint64_t version);
  /// The segment's name, with its leading '/'.
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  size_t bytes_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
};

/// Reads versions from a segment written by shm_publisher (in another process).
class shm_receiver {
 public:
  /// Reads segment `name` ("/x" or "x"); it need not exist yet.
  explicit shm_receiver(std::string name);

  /// Waits up to `deadline` for a version >= `want_version`, copies it into `p`'s buffer (which
  /// must have the payload's byte count) and returns its version. Throws shm_error naming the
  /// segment on timeout, size or checksum mismatch; `p` is then unchanged.
  uint64_t apply(llm::flat_params& p, uint64_t want_version, std::chrono::milliseconds deadline);

 private:
  std::string name_;
  at::Tensor staged_;  ///< reused CPU copy of the payload
};

/// The ipc transport for weights on the CPU: the publisher owns segment
/// "/milesrt-<pid>-<publisher>"; each engine copies each version out of it.
class ipc_transport final : public transport {
 public:
  explicit ipc_transport(transport_options options = {}) : options_(std::move(options)) {}
  const char* name() const override { return "ipc"; }
  bool publish(const published_version& v, weights_update& u) override;
  apply_result apply(llm::decoder& model, const weights_update& u,
                     const apply_context& ctx) override;
  bool serves(const weights_update& u) const override;

 private:
  transport_options options_;
  std::unique_ptr<shm_publisher> segment_;  ///< the publisher's side
  std::unique_ptr<shm_receiver> reader_;    ///< an engine's side
  std::string reader_location_;
};

}  // namespace milesrt::weights
