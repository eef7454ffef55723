#pragma once
/// The collectives data-parallel ranks need, behind one small interface: all_reduce,
/// reduce_scatter, all_gather, broadcast and barrier over a fixed group of ranks. The algorithms
/// are a collective library's (Gloo inside libtorch on the CPU, NCCL on GPUs; docs/distributed.md
/// says why), never ours. Each backend is one class in its own file with its own factory
/// (gloo_collectives.hpp, nccl_collectives.hpp; make_collectives picks one for a device); the
/// ranks meet through a TCP store on rank 0 (rendezvous.hpp).
///
/// An object belongs to one thread of one rank; every rank must call the same collectives in the
/// same order with tensors of the same shape and dtype. A collective that fails (a peer died, the
/// operation timed out) throws collective_failed naming the operation and the rank.

#include <ATen/core/Tensor.h>

#include <caf/expected.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

namespace milesrt::dist {

/// Who this rank is and where the group meets.
struct group_options {
  std::string host = "127.0.0.1";  ///< rank 0's address: its TCP store listens there
  uint16_t port = 0;               ///< the store's port (rank 0 listens, the others connect)
  int rank = 0;                    ///< 0 .. world_size - 1
  int world_size = 1;
  /// How long a rank waits for every other rank to join before giving up with an error that
  /// names the ranks missing.
  std::chrono::milliseconds join_timeout{30000};
  /// How long one collective may take before it fails.
  std::chrono::milliseconds op_timeout{60000};
};

/// A collective failed after the group was formed: the message names the operation and the rank.
struct collective_failed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A group of ranks and the collectives they run together. Tensors are dense and contiguous,
/// on the device the backend serves; sums are the only reduction (what gradients need).
class collectives {
 public:
  virtual ~collectives() = default;
  /// The library doing the work ("gloo").
  virtual const char* backend() const = 0;
  /// This rank, 0 .. world_size() - 1.
  virtual int rank() const = 0;
  /// How many ranks the group has.
  virtual int world_size() const = 0;
  /// Where this rank's tensors must be (the CPU for Gloo, the rank's GPU for NCCL).
  virtual at::Device device() const = 0;

  /// Replaces `t` on every rank by the sum of every rank's `t`.
  virtual void all_reduce(at::Tensor& t) = 0;
  /// `in` is world_size() equal slices; `out` (one slice's size) gets the sum over the ranks of
  /// slice rank() of their `in`.
  virtual void reduce_scatter(at::Tensor& out, const at::Tensor& in) = 0;
  /// `out` (world_size() times `in`'s size) gets every rank's `in`, in rank order.
  virtual void all_gather(at::Tensor& out, const at::Tensor& in) = 0;
  /// Every rank's `t` gets rank `root`'s `t`.
  virtual void broadcast(at::Tensor& t, int root) = 0;
  /// Returns once every rank has called it.
  virtual void barrier() = 0;
};

/// The backend for tensors on `device`: Gloo on the CPU, NCCL on a CUDA device (that device).
caf::expected<std::unique_ptr<collectives>> make_collectives(const group_options& o,
                                                             const at::Device& device);

}  // namespace milesrt::dist
