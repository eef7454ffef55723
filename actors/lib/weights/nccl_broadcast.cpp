#include "actors/lib/weights/nccl_broadcast.hpp"

#ifdef MILESRT_HAVE_NCCL

#include <ATen/ATen.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>
#include <map>
#include <string>

#include "actors/lib/weights/transfer_plan.hpp"

#define MILESRT_CUDA_CHECK(call)                                                                 \
  do {                                                                                           \
    cudaError_t e_ = (call);                                                                     \
    if (e_ != cudaSuccess)                                                                       \
      throw ::milesrt::weights::nccl_error(std::string(#call) + " failed at " + __FILE__ + ":" + \
                                           std::to_string(__LINE__) + ": " +                     \
                                           cudaGetErrorString(e_));                              \
  } while (0)

#define MILESRT_NCCL_CHECK(call)                                                                  \
  do {                                                                                            \
    ncclResult_t r_ = (call);                                                                     \
    if (r_ != ncclSuccess)                                                                        \
      throw ::milesrt::weights::nccl_error(                                                       \
          std::string(#call) + " failed at " + __FILE__ + ":" + std::to_string(__LINE__) + ": " + \
          ncclGetErrorString(r_) + " (" + ncclGetLastError(nullptr) + ")");                       \
  } while (0)

namespace milesrt::weights {

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
  auto sizes = p.element_counts();
  for (auto& s : sizes) s.second *= buf.element_size();  // bytes
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

void nccl_broadcaster::run_plan(llm::flat_params& p, const std::vector<transfer>& plan) {
  const at::Tensor& buf = p.buffer();
  if (!buf.is_cuda() || buf.get_device() != device_)
    throw nccl_error("nccl_broadcaster: rank " + std::to_string(rank_) + " has its parameters on " +
                     buf.device().str() + ", not cuda:" + std::to_string(device_));
  std::map<std::string, std::pair<int64_t, int64_t>> where;  // tensor -> (first element, elements)
  int64_t offset = 0;
  for (const auto& [name, n] : p.element_counts()) {
    where[name] = {offset, n};
    offset += n;
  }
  const int64_t es = buf.element_size();
  auto* base = static_cast<char*>(buf.data_ptr());
  auto stream = static_cast<cudaStream_t>(stream_);
  MILESRT_CUDA_CHECK(cudaSetDevice(device_));
  MILESRT_CUDA_CHECK(cudaDeviceSynchronize());
  MILESRT_NCCL_CHECK(ncclGroupStart());
  for (const auto& t : plan) {
    auto it = where.find(t.tensor);
    if (it == where.end()) {
      ncclGroupEnd();
      throw nccl_error("nccl p2p plan: rank " + std::to_string(rank_) + " has no tensor '" +
                       t.tensor + "'");
    }
    const auto [first, n] = it->second;
    if (t.src_rank == rank_) {
      if (t.src_offset + t.length > n) {
        ncclGroupEnd();
        throw nccl_error("nccl p2p plan: '" + t.tensor + "' has " + std::to_string(n) +
                         " elements");
      }
      MILESRT_NCCL_CHECK(ncclSend(base + (first + t.src_offset) * es,
                                  static_cast<size_t>(t.length * es), ncclUint8, t.dst_rank,
                                  static_cast<ncclComm_t>(comm_), stream));
    }
    if (t.dst_rank == rank_) {
      if (t.dst_offset + t.length > n) {
        ncclGroupEnd();
        throw nccl_error("nccl p2p plan: '" + t.tensor + "' has " + std::to_string(n) +
                         " elements");
      }
      MILESRT_NCCL_CHECK(ncclRecv(base + (first + t.dst_offset) * es,
                                  static_cast<size_t>(t.length * es), ncclUint8, t.src_rank,
                                  static_cast<ncclComm_t>(comm_), stream));
    }
  }
  MILESRT_NCCL_CHECK(ncclGroupEnd());
  MILESRT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

std::string nccl_id_to_hex(const nccl_id& id) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (char c : id) {
    const auto b = static_cast<unsigned char>(c);
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

nccl_id nccl_id_from_hex(const std::string& hex) {
  nccl_id id{};
  if (hex.size() != 2 * id.size())
    throw nccl_error("an NCCL id of " + std::to_string(hex.size()) + " hex digits");
  for (size_t i = 0; i < id.size(); ++i)
    id[i] = static_cast<char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return id;
}

// -- what the NCCL transports share ------------------------------------------------------------

bool nccl_transport::publish(const published_version& v, weights_update& u) {
  const auto& b = v.weights->buffer();
  if (!b.is_cuda()) {
    throw std::runtime_error(std::string("transport '") + name() +
                             "' moves weights between GPUs; the trainer's are on " +
                             b.device().str());
  }
  if (location_.empty()) {
    id_ = nccl_broadcaster::make_id();
    location_ = "nccl:" + std::to_string(options_.engines + 1) + ":" +
                std::to_string(options_.bucket_bytes) + ":" + nccl_id_to_hex(id_);
  }
  u.location = location_;
  pending_ = v.weights;
  return true;  // the engines join once they have the update
}

void nccl_transport::after_reply() {
  if (!pending_) return;
  auto src = std::move(pending_);
  if (!comm_) {
    comm_ = std::make_unique<nccl_broadcaster>(id_, static_cast<int>(options_.engines) + 1, 0,
                                               src->buffer().device().index());
  }
  exchange(*comm_, *src, static_cast<int>(options_.engines), options_.bucket_bytes);
}

apply_result nccl_transport::apply(llm::decoder& model, const weights_update& u,
                                   const apply_context& ctx) {
  // location: "nccl:<world>:<bucket bytes>:<hex id>"
  std::vector<std::string> f;
  size_t from = 0;
  for (size_t at; (at = u.location.find(':', from)) != std::string::npos; from = at + 1) {
    f.push_back(u.location.substr(from, at - from));
  }
  f.push_back(u.location.substr(from));
  if (f.size() != 4 || f[0] != "nccl")
    throw std::runtime_error("'" + u.location + "' is not an NCCL location");
  const int world = std::stoi(f[1]);
  const int64_t bucket = std::stoll(f[2]);
  auto& p = model.mutable_published();
  if (ctx.rank < 1 || ctx.rank >= world) {
    throw std::runtime_error("this engine is rank " + std::to_string(ctx.rank) +
                             " but the publisher set up " + std::to_string(world - 1) +
                             " engine ranks (publisher.engines)");
  }
  if (!comm_)
    comm_ = std::make_unique<nccl_broadcaster>(nccl_id_from_hex(f[3]), world, ctx.rank,
                                               p.buffer().device().index());
  exchange(*comm_, p, world - 1, bucket);
  return {};
}

}  // namespace milesrt::weights

#endif
