#include "actors/publisher/nccl_broadcast.hpp"

#ifdef MILESRT_PUBLISHER_HAVE_NCCL

#include <ATen/ATen.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>
#include <string>

#include "actors/publisher/transfer_plan.hpp"

#define MILESRT_CUDA_CHECK(call)                                                               \
  do {                                                                                         \
    cudaError_t e_ = (call);                                                                   \
    if (e_ != cudaSuccess)                                                                     \
      throw ::milesrt::publisher::nccl_error(std::string(#call) + " failed at " + __FILE__ + \
                                             ":" + std::to_string(__LINE__) + ": " +           \
                                             cudaGetErrorString(e_));                          \
  } while (0)

#define MILESRT_NCCL_CHECK(call)                                                               \
  do {                                                                                         \
    ncclResult_t r_ = (call);                                                                  \
    if (r_ != ncclSuccess)                                                                     \
      throw ::milesrt::publisher::nccl_error(std::string(#call) + " failed at " + __FILE__ + \
                                             ":" + std::to_string(__LINE__) + ": " +           \
                                             ncclGetErrorString(r_) + " (" +                   \
                                             ncclGetLastError(nullptr) + ")");                 \
  } while (0)

namespace milesrt::publisher {

static_assert(sizeof(ncclUniqueId) == sizeof(nccl_id), "NCCL_UNIQUE_ID_BYTES changed");

nccl_id nccl_broadcaster::make_id() {
  ncclUniqueId id;
  MILESRT_NCCL_CHECK(ncclGetUniqueId(&id));
  nccl_id out;
  std::memcpy(out.data(), &id, sizeof(id));
  return out;
}

nccl_broadcaster::nccl_broadcaster(const nccl_id& id, int nranks, int rank, int device)
    : rank_(rank), nranks_(nranks), device_(device) {
  if (nranks < 1 || rank < 0 || rank >= nranks)
    throw nccl_error("nccl_broadcaster: rank " + std::to_string(rank) + " of " +
                     std::to_string(nranks));
  MILESRT_CUDA_CHECK(cudaSetDevice(device));
  ncclUniqueId uid;
  std::memcpy(&uid, id.data(), sizeof(uid));
  ncclComm_t comm = nullptr;
  MILESRT_NCCL_CHECK(ncclCommInitRank(&comm, nranks, uid, rank));
  comm_ = comm;
  cudaStream_t stream = nullptr;
  cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    ncclCommDestroy(comm);
    MILESRT_CUDA_CHECK(e);
  }
  stream_ = stream;
}

nccl_broadcaster::~nccl_broadcaster() {
  // No throwing from here: errors at teardown are reported by the calls before it.
  cudaSetDevice(device_);
  if (comm_) ncclCommDestroy(static_cast<ncclComm_t>(comm_));
  if (stream_) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

void nccl_broadcaster::broadcast(llm::flat_params& p, int root, int64_t bucket_bytes) {
  const at::Tensor& buf = p.buffer();
  if (!buf.is_cuda() || buf.get_device() != device_)
    throw nccl_error("nccl_broadcaster: rank " + std::to_string(rank_) + " has its parameters on " +
                     buf.device().str() + ", not cuda:" + std::to_string(device_));
  if (root < 0 || root >= nranks_)
    throw nccl_error("nccl_broadcaster: root " + std::to_string(root) + " of " +
                     std::to_string(nranks_) + " ranks");
  MILESRT_CUDA_CHECK(cudaSetDevice(device_));
  // The buffer may still be written by work queued on other streams (the optimizer step).
  MILESRT_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<std::pair<std::string, int64_t>> sizes;
  const int64_t es = buf.element_size();
  for (size_t i = 0; i < p.names().size(); ++i) {
    int64_t n = 1;
    for (auto s : p.shapes()[i]) n *= s;
    sizes.emplace_back(p.names()[i], n * es);
  }
  auto* base = static_cast<char*>(buf.data_ptr());
  auto stream = static_cast<cudaStream_t>(stream_);
  int64_t offset = 0;
  for (const auto& b : make_buckets(sizes, bucket_bytes)) {
    if (b.bytes > 0)
      MILESRT_NCCL_CHECK(ncclBroadcast(base + offset, base + offset, static_cast<size_t>(b.bytes),
                                       ncclUint8, root, static_cast<ncclComm_t>(comm_), stream));
    offset += b.bytes;
  }
  MILESRT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace milesrt::publisher

#endif
