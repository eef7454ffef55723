#include "actors/lib/weights/nccl_broadcast.hpp"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>

#include <thread>

#include "actors/lib/weights/tensor_hash.hpp"

namespace milesrt::weights {
namespace {

#ifdef MILESRT_HAVE_NCCL

// Each GPU (at most 4) is one rank; rank 0 holds random weights, the others zeros. On one GPU
// this is the nranks = 1 case (the buffer must come through unchanged).
TEST(NcclBroadcast, GpuBroadcastsInBuckets) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const int nranks = std::min<int>(4, at::getNumGPUs());
  const std::vector<std::pair<std::string, std::vector<int64_t>>> specs = {
      {"embed", {1000, 64}}, {"layers.0.w", {64, 3, 7}}, {"norm", {63}}, {"lm_head", {1000, 64}}};
  std::vector<std::unique_ptr<llm::flat_params>> params;
  for (int r = 0; r < nranks; ++r) {
    params.push_back(
        std::make_unique<llm::flat_params>(specs, at::kBFloat16, at::Device(at::kCUDA, r)));
    if (r == 0) params[0]->buffer().detach().copy_(at::randn({params[0]->buffer().numel()}));
  }
  const auto want = param_hashes(*params[0]);
  const auto id = nccl_broadcaster::make_id();
  std::vector<std::string> errors(nranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r)
    threads.emplace_back([&, r] {
      try {
        nccl_broadcaster b(id, nranks, r, r);
        b.broadcast(*params[r], 0, 100000);  // several buckets, one tensor bigger than a bucket
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < nranks; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    EXPECT_EQ(param_hashes(*params[r]), want) << "rank " << r;
  }
}

// A p2p plan run on one rank: a send to itself from one part of a tensor to another (the
// mechanics of run_plan's NCCL group; several ranks need several GPUs).
TEST(NcclBroadcast, GpuRunsAPlanOnOneRank) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  llm::flat_params p({{"x", {10}}, {"y", {6}}}, at::kFloat, at::Device(at::kCUDA, 0));
  p.buffer().detach().copy_(at::arange(16, at::kFloat));
  nccl_broadcaster b(nccl_broadcaster::make_id(), 1, 0, 0);
  std::vector<transfer> plan = {{0, 0, "x", 0, 5, 5}, {0, 0, "y", 3, 0, 3}};
  b.run_plan(p, plan);
  auto got = p.buffer().cpu();
  std::vector<float> want = {0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 13, 14, 15, 13, 14, 15};
  for (int i = 0; i < 16; ++i) EXPECT_EQ(got[i].item<float>(), want[i]) << "element " << i;
  EXPECT_EQ(nccl_id_from_hex(nccl_id_to_hex(b.make_id())).size(), 128u);
}

TEST(NcclBroadcast, GpuRejectsCpuParams) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  llm::flat_params p({{"x", {4}}}, at::kFloat, at::kCPU);
  nccl_broadcaster b(nccl_broadcaster::make_id(), 1, 0, 0);
  EXPECT_THROW(b.broadcast(p, 0), nccl_error);
}

#else

TEST(NcclBroadcast, GpuBroadcastsInBuckets) { GTEST_SKIP() << "built without NCCL"; }

#endif

}  // namespace
}  // namespace milesrt::weights
