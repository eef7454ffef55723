#pragma once
/// The broadcast transport on GPUs: one rank (the trainer's) broadcasts the flat parameter
/// buffer to every other rank over NCCL, in buckets of whole tensors. Compiled only where the
/// build finds NCCL (CMake then defines MILESRT_HAVE_NCCL).

#ifdef MILESRT_HAVE_NCCL

#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "actors/lib/llm/model.hpp"
#include "actors/lib/weights/transfer_plan.hpp"
#include "actors/lib/weights/transport.hpp"

namespace milesrt::weights {

/// An NCCL or CUDA call failed; the message has the call, file, line and the library's error.
struct nccl_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The bytes of an ncclUniqueId (NCCL_UNIQUE_ID_BYTES), so that this header needs no nccl.h.
using nccl_id = std::array<char, 128>;

/// The id as text (for a weights_update) and back; throws nccl_error on a malformed text.
std::string nccl_id_to_hex(const nccl_id& id);
nccl_id nccl_id_from_hex(const std::string& hex);

/// One rank of a broadcast group; each rank's flat_params must have the same names and shapes.
class nccl_broadcaster {
 public:
  /// A new id (on one rank, then sent to the others out of band).
  static nccl_id make_id();
  /// Joins communicator `id` as `rank` of `nranks` on CUDA device `device` (collective: every
  /// rank constructs at the same time; nranks = 1 is allowed).
  nccl_broadcaster(const nccl_id& id, int nranks, int rank, int device);
  ~nccl_broadcaster();
  nccl_broadcaster(const nccl_broadcaster&) = delete;
  nccl_broadcaster& operator=(const nccl_broadcaster&) = delete;

  /// Broadcasts `p`'s buffer (on this rank's device) from `root` into every rank's, one NCCL call
  /// per bucket of about `bucket_bytes` (make_buckets); returns when this rank's copy is complete.
  void broadcast(llm::flat_params& p, int root, int64_t bucket_bytes = 256 << 20);
  /// Runs this rank's part of a p2p plan (transfer_plan.hpp) over `p`'s buffer in one NCCL group:
  /// sends where it is the source, receives where it is the destination. Shards are whole tensors
  /// (offsets count from the tensor's first element), as plan_whole_model makes them.
  void run_plan(llm::flat_params& p, const std::vector<transfer>& plan);

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

 private:
  void* comm_ = nullptr;    ///< ncclComm_t
  void* stream_ = nullptr;  ///< cudaStream_t
  int rank_ = 0, nranks_ = 1, device_ = 0;
};

/// What the broadcast and p2p transports share: the publisher makes an NCCL id once and names it
/// in each update ("nccl:<world>:<bucket bytes>:<hex id>"); after answering it joins as rank 0
/// and sends. Each engine joins as its rank on its first update and receives. The collective
/// itself is the subclass's (broadcast.cpp, p2p.cpp).
class nccl_transport : public transport {
 public:
  explicit nccl_transport(transport_options options) : options_(std::move(options)) {}
  bool publish(const published_version& v, weights_update& u) override;
  void after_reply() override;
  apply_result apply(llm::decoder& model, const weights_update& u,
                     const apply_context& ctx) override;

 protected:
  /// This rank's part of moving `p` among `engines` engine ranks and rank 0.
  virtual void exchange(nccl_broadcaster& comm, llm::flat_params& p, int engines,
                        int64_t bucket_bytes) = 0;

 private:
  transport_options options_;
  std::string location_;  ///< the publisher's, made on the first publish
  nccl_id id_{};
  std::shared_ptr<llm::flat_params> pending_;  ///< the version after_reply sends
  std::unique_ptr<nccl_broadcaster> comm_;
};

/// broadcast: the whole buffer from rank 0 to every engine, in buckets of whole tensors.
class broadcast_transport final : public nccl_transport {
 public:
  using nccl_transport::nccl_transport;
  const char* name() const override { return "broadcast"; }

 protected:
  void exchange(nccl_broadcaster& comm, llm::flat_params& p, int engines,
                int64_t bucket_bytes) override;
};

/// p2p: sends and receives along a transfer plan computed once (plan_whole_model today).
class p2p_transport final : public nccl_transport {
 public:
  using nccl_transport::nccl_transport;
  const char* name() const override { return "p2p"; }

 protected:
  void exchange(nccl_broadcaster& comm, llm::flat_params& p, int engines,
                int64_t bucket_bytes) override;

 private:
  std::vector<transfer> plan_;
};

}  // namespace milesrt::weights

#endif
