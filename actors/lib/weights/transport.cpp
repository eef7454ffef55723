// The two factories: the one place that maps a transport's name to its class.
#include "actors/lib/weights/transport.hpp"

#include "actors/lib/weights/colocated.hpp"
#include "actors/lib/weights/cuda_ipc.hpp"
#include "actors/lib/weights/disk_delta.hpp"
#include "actors/lib/weights/ipc.hpp"
#include "actors/lib/weights/nccl_broadcast.hpp"

namespace milesrt::weights {
using Transport = schema::PublisherParams::Transport;

std::string transport::full_copy(uint64_t) {
  throw full_copy_refused("has published nothing on disk");
}

std::string transport_name(Transport kind) {
  switch (kind) {
    case Transport::COLOCATED:
      return "colocated";
    case Transport::IPC:
      return "ipc";
    case Transport::BROADCAST:
      return "broadcast";
    case Transport::P2P:
      return "p2p";
    case Transport::DISK_DELTA:
      return "disk_delta";
  }
  return "?";
}

#ifndef MILESRT_HAVE_NCCL
namespace {

[[noreturn]] void needs_nccl(const std::string& name) {
  throw std::runtime_error("transport '" + name + "' needs a build with CUDA and NCCL");
}

}  // namespace
#endif

std::unique_ptr<transport> make_transport(Transport kind, const at::Device& device,
                                          const transport_options& options) {
  switch (kind) {
    case Transport::COLOCATED:
      return std::make_unique<colocated_transport>();
    case Transport::IPC:
      if (device.is_cuda()) {
#ifdef MILESRT_HAVE_CUDA_IPC
        return std::make_unique<cuda_ipc_transport>();
#else
        throw std::runtime_error("ipc of weights on a GPU needs a build with CUDA");
#endif
      }
      return std::make_unique<ipc_transport>(options);
    case Transport::DISK_DELTA:
      return std::make_unique<disk_delta_transport>(options);
#ifdef MILESRT_HAVE_NCCL
    case Transport::BROADCAST:
      return std::make_unique<broadcast_transport>(options);
    case Transport::P2P:
      return std::make_unique<p2p_transport>(options);
#else
    case Transport::BROADCAST:
    case Transport::P2P:
      needs_nccl(transport_name(kind));
#endif
  }
  throw std::runtime_error("transport " + std::to_string(static_cast<int>(kind)) +
                           " is not known to this build");
}

std::unique_ptr<transport> make_transport(const weights_update& u) {
  const std::string& t = u.transport;
  if (t == "colocated") return std::make_unique<colocated_transport>();
  if (t == "ipc" && u.location.rfind("cuda-ipc:", 0) == 0) {
#ifdef MILESRT_HAVE_CUDA_IPC
    return std::make_unique<cuda_ipc_transport>();
#else
    throw std::runtime_error("a CUDA IPC update reached an engine built without CUDA");
#endif
  }
  if (t == "ipc") return std::make_unique<ipc_transport>();
  if (t == "disk_delta") return std::make_unique<disk_delta_transport>();
#ifdef MILESRT_HAVE_NCCL
  if (t == "broadcast") return std::make_unique<broadcast_transport>(transport_options{});
  if (t == "p2p") return std::make_unique<p2p_transport>(transport_options{});
#else
  if (t == "broadcast" || t == "p2p") needs_nccl(t);
#endif
  throw std::runtime_error("transport '" + t + "' cannot be applied by this engine");
}

}  // namespace milesrt::weights
