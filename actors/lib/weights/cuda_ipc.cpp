#include "actors/lib/weights/cuda_ipc.hpp"

#ifdef MILESRT_HAVE_CUDA_IPC

#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>

#include <cstring>

#define MILESRT_CUDA_IPC_CHECK(call)                                                           \
  do {                                                                                         \
    cudaError_t e_ = (call);                                                                   \
    if (e_ != cudaSuccess)                                                                     \
      throw ::milesrt::weights::cuda_ipc_error(std::string(#call) + " failed at " + __FILE__ + \
                                               ":" + std::to_string(__LINE__) + ": " +         \
                                               cudaGetErrorString(e_));                        \
  } while (0)

namespace milesrt::weights {
namespace {

std::string to_hex(const void* data, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  const auto* b = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    out += digits[b[i] >> 4];
    out += digits[b[i] & 15];
  }
  return out;
}

void from_hex(const std::string& hex, void* data, size_t n) {
  if (hex.size() != 2 * n)
    throw cuda_ipc_error("cuda ipc: a handle of " + std::to_string(hex.size()) + " hex digits");
  auto* b = static_cast<unsigned char*>(data);
  for (size_t i = 0; i < n; ++i)
    b[i] = static_cast<unsigned char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
}

}  // namespace

cuda_ipc_publisher::cuda_ipc_publisher(size_t bytes, int device, int slots)
    : bytes_(bytes), device_(device) {
  MILESRT_CUDA_IPC_CHECK(cudaSetDevice(device));
  for (int i = 0; i < slots; ++i) {
    void* ptr = nullptr;
    MILESRT_CUDA_IPC_CHECK(cudaMalloc(&ptr, bytes));
    buffers_.push_back(ptr);
    cudaIpcMemHandle_t h;
    MILESRT_CUDA_IPC_CHECK(cudaIpcGetMemHandle(&h, ptr));
    handles_.push_back(to_hex(&h, sizeof(h)));
  }
}

cuda_ipc_publisher::~cuda_ipc_publisher() {
  for (void* p : buffers_) cudaFree(p);
}

std::string cuda_ipc_publisher::publish(const llm::flat_params& p) {
  const auto& buf = p.buffer();
  if (!buf.is_cuda()) throw cuda_ipc_error("cuda ipc: the weights are not on a CUDA device");
  const size_t n = buf.numel() * buf.element_size();
  if (n != bytes_) {
    throw cuda_ipc_error("cuda ipc: weights of " + std::to_string(n) + " bytes for buffers of " +
                         std::to_string(bytes_));
  }
  MILESRT_CUDA_IPC_CHECK(cudaSetDevice(device_));
  // Wait for the kernels that wrote the weights, then copy them where other processes look.
  MILESRT_CUDA_IPC_CHECK(cudaDeviceSynchronize());
  void* dst = buffers_[next_];
  MILESRT_CUDA_IPC_CHECK(cudaMemcpy(dst, buf.data_ptr(), n, cudaMemcpyDeviceToDevice));
  // A device-to-device cudaMemcpy may return before the copy is done: the engines read the
  // buffer from other processes, which nothing orders after it.
  MILESRT_CUDA_IPC_CHECK(cudaDeviceSynchronize());
  const std::string location = "cuda-ipc:" + std::to_string(n) + ":" + handles_[next_] + ":0";
  next_ = (next_ + 1) % buffers_.size();
  return location;
}

std::string cuda_ipc_publisher::share(const llm::flat_params& p) {
  const auto& buf = p.buffer();
  if (!buf.is_cuda()) throw cuda_ipc_error("cuda ipc: the weights are not on a CUDA device");
  const size_t n = buf.numel() * buf.element_size();
  MILESRT_CUDA_IPC_CHECK(cudaSetDevice(buf.device().index()));
  // Wait for the kernels that wrote the weights: the engines' copies are not ordered after them.
  MILESRT_CUDA_IPC_CHECK(cudaDeviceSynchronize());
  size_t size = 0;
  void* base = nullptr;
  try {
    base = c10::cuda::CUDACachingAllocator::getBaseAllocation(buf.data_ptr(), &size);
  } catch (const std::exception& e) {
    throw cuda_ipc_error(std::string("cuda ipc: the weights' allocation cannot be shared: ") +
                         e.what());
  }
  const auto offset = static_cast<size_t>(static_cast<const char*>(buf.data_ptr()) -
                                          static_cast<const char*>(base));
  if (base == nullptr || offset + n > size)
    throw cuda_ipc_error("cuda ipc: the weights' allocation cannot be shared");
  cudaIpcMemHandle_t h;
  MILESRT_CUDA_IPC_CHECK(cudaIpcGetMemHandle(&h, base));
  return "cuda-ipc:" + std::to_string(n) + ":" + to_hex(&h, sizeof(h)) + ":" +
         std::to_string(offset);
}

cuda_ipc_receiver::~cuda_ipc_receiver() {
  for (auto& [h, ptr] : opened_) cudaIpcCloseMemHandle(ptr);
}

void cuda_ipc_receiver::apply(llm::flat_params& p, const std::string& location) {
  const std::string prefix = "cuda-ipc:";
  const auto colon = location.find(':', prefix.size());
  if (location.rfind(prefix, 0) != 0 || colon == std::string::npos) {
    throw cuda_ipc_error("cuda ipc: '" + location + "' is not a cuda-ipc location");
  }
  const size_t n = std::stoull(location.substr(prefix.size(), colon - prefix.size()));
  // <hex of the handle>[:<offset in its allocation>]
  const auto colon2 = location.find(':', colon + 1);
  const std::string hex = location.substr(
      colon + 1, colon2 == std::string::npos ? std::string::npos : colon2 - colon - 1);
  const size_t offset = colon2 == std::string::npos ? 0 : std::stoull(location.substr(colon2 + 1));
  const auto& buf = p.buffer();
  if (!buf.is_cuda())
    throw cuda_ipc_error("cuda ipc: the engine's weights are not on a CUDA device");
  if (static_cast<size_t>(buf.numel() * buf.element_size()) != n) {
    throw cuda_ipc_error("cuda ipc: " + std::to_string(n) +
                         " bytes published for an engine buffer of " +
                         std::to_string(buf.numel() * buf.element_size()));
  }
  MILESRT_CUDA_IPC_CHECK(cudaSetDevice(buf.device().index()));
  void* src = nullptr;
  auto it = opened_.find(hex);
  if (it != opened_.end()) {
    src = it->second;
  } else {
    cudaIpcMemHandle_t h;
    from_hex(hex, &h, sizeof(h));
    MILESRT_CUDA_IPC_CHECK(cudaIpcOpenMemHandle(&src, h, cudaIpcMemLazyEnablePeerAccess));
    opened_[hex] = src;
  }
  MILESRT_CUDA_IPC_CHECK(cudaMemcpy(buf.data_ptr(), static_cast<const char*>(src) + offset, n,
                                    cudaMemcpyDeviceToDevice));
  // Done before the update counts as applied: a shared buffer is valid only until the trainer's
  // next step, and a ring buffer only until the ring comes round.
  MILESRT_CUDA_IPC_CHECK(cudaDeviceSynchronize());
}

// -- the transport -----------------------------------------------------------------------------

bool cuda_ipc_transport::publish(const published_version& v, weights_update& u) {
  if (!v.frozen) {  // handover = share: the trainer's own buffer, valid until its next step
    u.location = cuda_ipc_publisher::share(*v.weights);
    return false;
  }
  const auto& b = v.weights->buffer();
  if (!ring_)
    ring_ = std::make_unique<cuda_ipc_publisher>(b.numel() * b.element_size(), b.device().index());
  u.location = ring_->publish(*v.weights);
  return false;
}

apply_result cuda_ipc_transport::apply(llm::decoder& model, const weights_update& u,
                                       const apply_context&) {
  if (!receiver_) receiver_ = std::make_unique<cuda_ipc_receiver>();
  receiver_->apply(model.mutable_published(), u.location);
  return {};
}

bool cuda_ipc_transport::serves(const weights_update& u) const {
  return u.transport == name() && u.location.rfind("cuda-ipc:", 0) == 0;
}

}  // namespace milesrt::weights

#endif
