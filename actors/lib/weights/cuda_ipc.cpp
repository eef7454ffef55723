#include "actors/lib/weights/cuda_ipc.hpp"

#ifdef MILESRT_PUBLISHER_HAVE_CUDA_IPC

#include <ATen/ATen.h>
#include <cuda_runtime_api.h>

#include <cstring>

#define MILESRT_CUDA_IPC_CHECK(call)                                                                   \
  do {                                                                                                 \
    cudaError_t e_ = (call);                                                                           \
    if (e_ != cudaSuccess)                                                                             \
      throw ::milesrt::weights::cuda_ipc_error(std::string(#call) + " failed at " + __FILE__ + ":" + \
                                                 std::to_string(__LINE__) + ": " + cudaGetErrorString(e_)); \
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
  if (hex.size() != 2 * n) throw cuda_ipc_error("cuda ipc: a handle of " + std::to_string(hex.size()) + " hex digits");
  auto* b = static_cast<unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<unsigned char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
}

}  // namespace

cuda_ipc_publisher::cuda_ipc_publisher(size_t bytes, int device, int slots) : bytes_(bytes), device_(device) {
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
    throw cuda_ipc_error("cuda ipc: weights of " + std::to_string(n) + " bytes for buffers of " + std::to_string(bytes_));
  }
  MILESRT_CUDA_IPC_CHECK(cudaSetDevice(device_));
  // Wait for the kernels that wrote the weights, then copy them where other processes look.
  MILESRT_CUDA_IPC_CHECK(cudaDeviceSynchronize());
  void* dst = buffers_[next_];
  MILESRT_CUDA_IPC_CHECK(cudaMemcpy(dst, buf.data_ptr(), n, cudaMemcpyDeviceToDevice));
  const std::string location = "cuda-ipc:" + std::to_string(n) + ":" + handles_[next_];
  next_ = (next_ + 1) % buffers_.size();
  return location;
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
  const std::string hex = location.substr(colon + 1);
  const auto& buf = p.buffer();
  if (!buf.is_cuda()) throw cuda_ipc_error("cuda ipc: the engine's weights are not on a CUDA device");
  if (static_cast<size_t>(buf.numel() * buf.element_size()) != n) {
    throw cuda_ipc_error("cuda ipc: " + std::to_string(n) + " bytes published for an engine buffer of " +
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
  MILESRT_CUDA_IPC_CHECK(cudaMemcpy(buf.data_ptr(), src, n, cudaMemcpyDeviceToDevice));
}

// -- the transport -----------------------------------------------------------------------------

bool cuda_ipc_transport::publish(const published_version& v, weights_update& u) {
  const auto& b = v.weights->buffer();
  if (!ring_) ring_ = std::make_unique<cuda_ipc_publisher>(b.numel() * b.element_size(), b.device().index());
  u.location = ring_->publish(*v.weights);
  return false;
}

apply_result cuda_ipc_transport::apply(llm::decoder& model, const weights_update& u, const apply_context&) {
  if (!receiver_) receiver_ = std::make_unique<cuda_ipc_receiver>();
  receiver_->apply(model.mutable_params(), u.location);
  return {};
}

bool cuda_ipc_transport::serves(const weights_update& u) const {
  return u.transport == name() && u.location.rfind("cuda-ipc:", 0) == 0;
}

}  // namespace milesrt::weights

#endif
