#include "actors/lib/dist/nccl_collectives.hpp"

#include <caf/sec.hpp>

#include "actors/lib/dist/rendezvous.hpp"

#ifdef MILESRT_HAVE_NCCL
#include <ATen/Functions.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>
#endif

namespace milesrt::dist {

#ifdef MILESRT_HAVE_NCCL
namespace {

const char* const kIdKey = "milesrt/nccl/unique_id";

std::string cuda_reason(cudaError_t e) { return cudaGetErrorString(e); }

ncclDataType_t nccl_type(const at::Tensor& t, const char* op) {
  switch (t.scalar_type()) {
    case at::kFloat:
      return ncclFloat32;
    case at::kDouble:
      return ncclFloat64;
    case at::kBFloat16:
      return ncclBfloat16;
    case at::kHalf:
      return ncclFloat16;
    case at::kInt:
      return ncclInt32;
    case at::kLong:
      return ncclInt64;
    case at::kByte:
      return ncclUint8;
    default:
      throw collective_failed(std::string("nccl ") + op + ": no NCCL type for " +
                              c10::toString(t.scalar_type()));
  }
}

class nccl_collectives final : public collectives {
 public:
  nccl_collectives(group_options o, int device, c10::intrusive_ptr<c10d::Store> store,
                   ncclComm_t comm)
      : options_(std::move(o)), device_(device), store_(std::move(store)), comm_(comm) {}
  ~nccl_collectives() override {
    // No collective is pending here (each one is waited for); an aborted group has no comm left.
    if (comm_ != nullptr) ncclCommDestroy(comm_);
  }

  const char* backend() const override { return "nccl"; }
  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }
  at::Device device() const override { return {at::kCUDA, static_cast<c10::DeviceIndex>(device_)}; }

  void all_reduce(at::Tensor& t) override {
    check(t, "all_reduce");
    run("all_reduce", [&](cudaStream_t s) {
      return ncclAllReduce(t.data_ptr(), t.data_ptr(), t.numel(), nccl_type(t, "all_reduce"),
                           ncclSum, comm_, s);
    });
  }

  void reduce_scatter(at::Tensor& out, const at::Tensor& in) override {
    check(out, "reduce_scatter");
    check(in, "reduce_scatter");
    TORCH_CHECK(in.numel() == out.numel() * options_.world_size, "reduce_scatter: in has ",
                in.numel(), " elements, out ", out.numel(), ", world ", options_.world_size);
    run("reduce_scatter", [&](cudaStream_t s) {
      return ncclReduceScatter(in.data_ptr(), out.data_ptr(), out.numel(),
                               nccl_type(in, "reduce_scatter"), ncclSum, comm_, s);
    });
  }

  void all_gather(at::Tensor& out, const at::Tensor& in) override {
    check(out, "all_gather");
    check(in, "all_gather");
    TORCH_CHECK(out.numel() == in.numel() * options_.world_size, "all_gather: out has ",
                out.numel(), " elements, in ", in.numel(), ", world ", options_.world_size);
    run("all_gather", [&](cudaStream_t s) {
      return ncclAllGather(in.data_ptr(), out.data_ptr(), in.numel(), nccl_type(in, "all_gather"),
                           comm_, s);
    });
  }

  void broadcast(at::Tensor& t, int root) override {
    TORCH_CHECK(root >= 0 && root < options_.world_size, "broadcast: root ", root,
                " is outside the group of ", options_.world_size);
    check(t, "broadcast");
    run("broadcast", [&](cudaStream_t s) {
      return ncclBroadcast(t.data_ptr(), t.data_ptr(), t.numel(), nccl_type(t, "broadcast"), root,
                           comm_, s);
    });
  }

  void barrier() override {
    auto one = at::ones({1}, at::TensorOptions().dtype(at::kFloat).device(device()));
    all_reduce(one);
  }

 private:
  void check(const at::Tensor& t, const char* op) const {
    if (!t.is_cuda() || t.get_device() != device_ || !t.is_contiguous())
      throw collective_failed(std::string("nccl ") + op + " on " + describe_rank(options_) +
                              ": the tensor must be contiguous on cuda:" + std::to_string(device_) +
                              ", got " + t.device().str());
  }

  /// Enqueues one collective on the device's current stream and waits for it, watching NCCL's
  /// asynchronous error and the deadline.
  template <class Enqueue>
  void run(const char* op, Enqueue&& enqueue) {
    if (aborted_) fail(op, "the group was aborted by an earlier failure");
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream(device_).stream();
    const ncclResult_t r = enqueue(stream);
    if (r != ncclSuccess)
      fail(op, ncclGetErrorString(r) + std::string(" (") + ncclGetLastError(comm_) + ")");
    cudaEvent_t done = nullptr;
    if (const cudaError_t e = cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
        e != cudaSuccess)
      fail(op, "cudaEventCreate: " + cuda_reason(e));
    if (const cudaError_t e = cudaEventRecord(done, stream); e != cudaSuccess) {
      cudaEventDestroy(done);  // an unrecorded event reads as done: wait on nothing
      abort();
      fail(op, "cudaEventRecord: " + cuda_reason(e));
    }
    const auto deadline = std::chrono::steady_clock::now() + options_.op_timeout;
    for (auto pause = std::chrono::microseconds(2);;
         pause = std::min(pause * 2, decltype(pause)(1000))) {
      const cudaError_t q = cudaEventQuery(done);
      if (q == cudaSuccess) break;
      if (q != cudaErrorNotReady) {
        cudaEventDestroy(done);
        abort();
        fail(op, cuda_reason(q));
      }
      ncclResult_t async = ncclSuccess;
      const ncclResult_t asked = ncclCommGetAsyncError(comm_, &async);
      if (asked != ncclSuccess) async = asked;
      if (async != ncclSuccess && async != ncclInProgress) {
        abort();
        cudaEventDestroy(done);
        fail(op, std::string("a peer failed: ") + ncclGetErrorString(async));
      }
      if (std::chrono::steady_clock::now() > deadline) {
        abort();
        cudaEventDestroy(done);
        fail(op, "not done within " + std::to_string(options_.op_timeout.count()) +
                     " ms (a peer died or stopped calling)");
      }
      std::this_thread::sleep_for(pause);
    }
    cudaEventDestroy(done);
  }

  void abort() {
    if (!aborted_) ncclCommAbort(comm_);
    aborted_ = true;
    comm_ = nullptr;
  }

  [[noreturn]] void fail(const char* op, const std::string& why) const {
    throw collective_failed("nccl " + std::string(op) + " failed on " + describe_rank(options_) +
                            ": " + why);
  }

  group_options options_;
  int device_;
  c10::intrusive_ptr<c10d::Store> store_;
  ncclComm_t comm_;
  bool aborted_ = false;
};

}  // namespace

bool nccl_available() { return true; }

caf::expected<std::unique_ptr<collectives>> make_nccl_collectives(const group_options& o,
                                                                  int device) {
  auto fail = [&](const std::string& why) {
    return caf::make_error(caf::sec::runtime_error,
                           "nccl: could not form the group on " + describe_rank(o) + ": " + why);
  };
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || device < 0 || device >= devices)
    return fail("cuda:" + std::to_string(device) + " is not a device of this machine (it has " +
                std::to_string(devices) + ")");
  auto store = rendezvous(o);
  if (!store) return std::move(store.error());
  try {
    ncclUniqueId id;
    if (o.rank == 0) {
      const ncclResult_t r = ncclGetUniqueId(&id);
      if (r != ncclSuccess) return fail(std::string("ncclGetUniqueId: ") + ncclGetErrorString(r));
      const auto* p = reinterpret_cast<const uint8_t*>(&id);
      (*store)->set(kIdKey, std::vector<uint8_t>(p, p + sizeof id));
    } else {
      const auto bytes = (*store)->get(kIdKey);
      if (bytes.size() != sizeof id)
        return fail("the unique id in the store has " + std::to_string(bytes.size()) +
                    " bytes, expected " + std::to_string(sizeof id));
      std::memcpy(&id, bytes.data(), sizeof id);
    }
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
    ncclComm_t comm = nullptr;
    const ncclResult_t r = ncclCommInitRank(&comm, o.world_size, id, o.rank);
    if (r != ncclSuccess)
      return fail(std::string("ncclCommInitRank: ") + ncclGetErrorString(r) + " (" +
                  ncclGetLastError(nullptr) + ")");
    return std::unique_ptr<collectives>(
        std::make_unique<nccl_collectives>(o, device, std::move(*store), comm));
  } catch (const std::exception& e) {
    std::string what = e.what();
    return fail(what.substr(0, what.find('\n')));
  }
}

#else

bool nccl_available() { return false; }

caf::expected<std::unique_ptr<collectives>> make_nccl_collectives(const group_options& o, int) {
  return caf::make_error(caf::sec::runtime_error,
                         "nccl: " + describe_rank(o) +
                             ": this build has no NCCL backend (built without CUDA or NCCL)");
}

#endif

}  // namespace milesrt::dist
