#pragma once
/// One way of moving a published version of a trainer's weights to the rollout engines. Each
/// transport is one class in its own file (colocated.cpp, ipc.cpp, cuda_ipc.cpp, disk_delta.cpp,
/// broadcast.cpp, p2p.cpp); the publisher and the engines' receiver only talk to this interface,
/// and the two factories below are the one place that maps a transport's name to its class. A new
/// transport: its file, a value of PublisherParams.Transport, and one line in each factory.
///
/// An object serves one side: the publisher's (publish, after_reply, full_copy) or one engine's
/// (apply); it keeps that side's state between versions (a shared-memory segment, the last delta
/// written, an NCCL communicator).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include "actors/lib/llm/model.hpp"
#include "actors/lib/weights/messages.hpp"
#include "milesrt/publisher.capnp.h"

namespace milesrt::weights {

class local_versions;

/// The publisher's settings a transport needs (from PublisherParams).
struct transport_options {
  std::string publisher;       ///< the publisher's name (names the shared-memory segment)
  std::filesystem::path dir;   ///< disk_delta: where versions are written
  uint32_t full_every = 0;     ///< disk_delta: a full copy every N versions (0: on request only)
  uint32_t keep_versions = 2;  ///< disk_delta: versions kept for full copies
  uint32_t engines = 1;        ///< broadcast / p2p: engine ranks 1..engines (the trainer is 0)
  int64_t bucket_bytes = 256 << 20;  ///< broadcast: bytes per NCCL call
};

/// A version as the publisher hands it to its transport.
struct published_version {
  uint64_t version = 0;
  /// The weights: the trainer's own buffer (handover = share: valid until the trainer's next
  /// step), or an immutable copy of this version (handover = copy).
  std::shared_ptr<llm::flat_params> weights;
  bool frozen = false;  ///< weights is an immutable copy
};

/// What an engine's receiver passes to apply().
struct apply_context {
  local_versions* local = nullptr;  ///< this process's trainers and copies (colocated)
  uint64_t have = 0;                ///< the version the model holds now (0 = as loaded)
  int rank = 1;                     ///< broadcast / p2p: this engine's NCCL rank
};

/// What apply() did.
struct apply_result {
  /// The update's hashes describe what the model now holds (false: skip verifyWeights, e.g. the
  /// engine converted the weights to its dtype, or found a newer version than the update names).
  bool verifiable = true;
  /// disk_delta: the delta was refused and a full copy was fetched from the publisher instead.
  bool full_copy = false;
};

/// full_copy() refused: the message says why, to follow "publisher '<name>' ".
struct full_copy_refused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class transport {
 public:
  virtual ~transport() = default;
  /// The name engines see in weights_update::transport ("colocated", "ipc", ...).
  virtual const char* name() const = 0;

  // --- The publisher's side ---
  /// Makes `v` reachable for the engines and writes into `u` what they need to find it
  /// (location, share). Returns true when after_reply() must run once `u` has gone out (the
  /// engines take part in it). Throws naming what is wrong.
  virtual bool publish(const published_version& v, weights_update& u) = 0;
  /// The part of the last publish that waits for the engines (NCCL collectives); blocks.
  virtual void after_reply() {}
  /// A full copy of `version` for an engine that could not apply its update: returns where it is
  /// (disk_delta: the directory). Throws full_copy_refused when there is none to be had.
  virtual std::string full_copy(uint64_t version);

  // --- An engine's side ---
  /// Brings `model` to u.version. Throws naming what is wrong; transports that read before they
  /// write (disk_delta, ipc) then leave the model as it was.
  virtual apply_result apply(llm::decoder& model, const weights_update& u,
                             const apply_context& ctx) = 0;
  /// This object can apply `u` (same transport, same kind of location): the receiver keeps using
  /// it, with its state, instead of making a new one.
  virtual bool serves(const weights_update& u) const { return u.transport == name(); }
};

/// The publisher's transport for `kind`, made on the first version, whose weights are on
/// `device` (ipc: shared memory from the CPU, CUDA IPC from a GPU). Throws std::runtime_error
/// when this build cannot publish that way.
std::unique_ptr<transport> make_transport(schema::PublisherParams::Transport kind,
                                          const at::Device& device,
                                          const transport_options& options);

/// An engine's transport for an update. Throws std::runtime_error naming the transport when this
/// build or engine cannot apply it.
std::unique_ptr<transport> make_transport(const weights_update& u);

/// The name engines see for a PublisherParams.Transport value.
std::string transport_name(schema::PublisherParams::Transport kind);

}  // namespace milesrt::weights
