// CUDA IPC between two processes on one GPU: the parent publishes two versions through
// cuda_ipc_publisher's ring (or shares its own buffer), a child process (this binary again)
// applies each with cuda_ipc_receiver and checks the per-tensor hashes. Skipped without a GPU.
#include "actors/lib/weights/cuda_ipc.hpp"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cstdlib>
#include <sstream>

#include "actors/lib/weights/tensor_hash.hpp"

extern char** environ;

namespace milesrt::weights {
namespace {

#ifdef MILESRT_HAVE_CUDA_IPC

llm::flat_params gpu_params(int seed) {
  llm::flat_params p({{"embed", {300, 64}}, {"layers.0.w", {64, 3, 7}}, {"norm", {63}}},
                     at::kBFloat16, at::Device(at::kCUDA, 0));
  if (seed > 0) {
    at::manual_seed(seed);
    p.buffer().detach().copy_(at::randn({p.buffer().numel()}));
  }
  return p;
}

std::string joined(const std::vector<uint64_t>& h) {
  std::ostringstream s;
  for (auto x : h) s << x << ',';
  return s.str();
}

// The child half: run by CudaIpc.GpuTwoProcessesRoundTrip with the location and hashes.
TEST(CudaIpcChild, GpuAppliesFromParent) {
  const char* where = std::getenv("MILESRT_CUDA_IPC_LOCATION");
  if (!where) GTEST_SKIP() << "run as a child process by CudaIpc.GpuTwoProcessesRoundTrip";
  auto p = gpu_params(0);
  cuda_ipc_receiver r;
  r.apply(p, where);
  EXPECT_EQ(joined(param_hashes(p)), std::getenv("MILESRT_CUDA_IPC_HASHES"));
}

int run_child(const std::string& location, const std::string& hashes) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.push_back(*e);
  env.push_back("MILESRT_CUDA_IPC_LOCATION=" + location);
  env.push_back("MILESRT_CUDA_IPC_HASHES=" + hashes);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe", filter = "--gtest_filter=CudaIpcChild.GpuAppliesFromParent";
  char* argv[] = {exe.data(), filter.data(), nullptr};
  pid_t child = 0;
  if (::posix_spawn(&child, exe.c_str(), nullptr, nullptr, argv, envp.data()) != 0) return -1;
  int status = 0;
  if (::waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

TEST(CudaIpc, GpuTwoProcessesRoundTrip) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  auto v1 = gpu_params(1), v2 = gpu_params(2);
  cuda_ipc_publisher pub(v1.buffer().nbytes(), 0, 2);
  const auto l1 = pub.publish(v1);
  EXPECT_EQ(run_child(l1, joined(param_hashes(v1))), 0)
      << "version 1 (the child's output is above)";
  const auto l2 = pub.publish(v2);
  EXPECT_NE(l1, l2);  // the next buffer of the ring
  EXPECT_EQ(run_child(l2, joined(param_hashes(v2))), 0) << "version 2";
}

// handover = share: the child copies out of the parent's own buffer, found inside the caching
// allocator's allocation by its offset (a second tensor is allocated first so that the buffer
// is unlikely to start its allocation); nothing is copied on the parent's side.
TEST(CudaIpc, GpuSharesTheTrainersOwnBuffer) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  auto before = at::empty({1000}, at::TensorOptions().dtype(at::kByte).device(at::kCUDA, 0));
  auto v = gpu_params(4);
  const auto where = cuda_ipc_publisher::share(v);
  EXPECT_EQ(where.rfind("cuda-ipc:" + std::to_string(v.buffer().nbytes()) + ":", 0), 0u) << where;
  EXPECT_EQ(run_child(where, joined(param_hashes(v))), 0)
      << "the shared buffer (the child's output is above)";
  // The trainer's next step changes its buffer in place: the next update sees the new values.
  v.buffer().detach().mul_(2);
  EXPECT_EQ(cuda_ipc_publisher::share(v), where);
  EXPECT_EQ(run_child(where, joined(param_hashes(v))), 0) << "the buffer after an in-place step";
}

TEST(CudaIpc, GpuRefusesMismatchedSizesAndCpuWeights) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  auto v = gpu_params(3);
  cuda_ipc_publisher pub(v.buffer().nbytes() + 2, 0, 1);
  EXPECT_THROW(pub.publish(v), cuda_ipc_error);
  llm::flat_params cpu({{"x", {4}}}, at::kFloat, at::kCPU);
  cuda_ipc_receiver r;
  EXPECT_THROW(r.apply(cpu, "cuda-ipc:16:00"), cuda_ipc_error);
  EXPECT_THROW(r.apply(v, "shm:/x"), cuda_ipc_error);
}

#else

TEST(CudaIpc, GpuTwoProcessesRoundTrip) { GTEST_SKIP() << "built without CUDA"; }

#endif

}  // namespace
}  // namespace milesrt::weights
