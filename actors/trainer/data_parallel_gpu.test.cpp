// The NCCL path of data parallelism on GPUs (label gpu; skipped without CUDA): NCCL's collectives
// through the dist interface, and the trainer stepping with an NCCL group. On one GPU the group
// has one rank (NCCL refuses two ranks on one device); the tests of two ranks run where two GPUs
// are, and say so when skipped.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "actors/lib/dist/nccl_collectives.hpp"
#include "actors/lib/dist/testing_ranks.hpp"
#include "actors/lib/llm/device.hpp"
#include "actors/lib/llm/tiny_model_testing.hpp"
#include "actors/trainer/rank_pool.hpp"
#include "actors/trainer/rank_test_batch.hpp"
#include "actors/trainer/trainer_core.hpp"

namespace milesrt::trainer {
namespace {
using testing::batch;
using testing::bitwise_equal;

int cuda_devices() { return at::hasCUDA() ? static_cast<int>(at::getNumGPUs()) : 0; }

dist::group_options one_rank() {
  dist::group_options g;
  g.port = dist::testing::free_port();
  g.join_timeout = g.op_timeout = std::chrono::milliseconds(30000);
  return g;
}

TEST(NcclCollectives, AGroupOfOneOnTheGpuRunsEveryCollective) {
  if (cuda_devices() < 1) GTEST_SKIP() << "no CUDA device";
  ASSERT_TRUE(dist::nccl_available()) << "a CUDA build without the NCCL backend";
  auto g = dist::make_collectives(one_rank(), at::Device(at::kCUDA, 0));
  ASSERT_TRUE(g) << caf::to_string(g.error());
  auto& c = **g;
  EXPECT_STREQ(c.backend(), "nccl");
  EXPECT_EQ(c.device(), at::Device(at::kCUDA, 0));
  const auto opts = at::TensorOptions().device(at::kCUDA, 0);
  for (auto dtype : {at::kFloat, at::kBFloat16, at::kDouble}) {
    const auto x = at::randn({1001}, opts.dtype(dtype));
    auto t = x.clone();
    c.all_reduce(t);
    EXPECT_TRUE(bitwise_equal(t.cpu(), x.cpu())) << "all_reduce " << dtype;
    auto out = at::empty_like(x);
    c.reduce_scatter(out, x);
    EXPECT_TRUE(bitwise_equal(out.cpu(), x.cpu())) << "reduce_scatter " << dtype;
    auto gathered = at::empty_like(x);
    c.all_gather(gathered, x);
    EXPECT_TRUE(bitwise_equal(gathered.cpu(), x.cpu())) << "all_gather " << dtype;
    auto b = x.clone();
    c.broadcast(b, 0);
    EXPECT_TRUE(bitwise_equal(b.cpu(), x.cpu())) << "broadcast " << dtype;
  }
  c.barrier();
  auto on_cpu = at::ones({4});
  try {
    c.all_reduce(on_cpu);
    FAIL() << "a CPU tensor was accepted";
  } catch (const dist::collective_failed& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 of 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
  }
}

TEST(NcclCollectives, ADeviceTheMachineLacksIsNamed) {
  if (cuda_devices() < 1) GTEST_SKIP() << "no CUDA device";
  const int missing = cuda_devices();
  auto g = dist::make_collectives(one_rank(), at::Device(at::kCUDA, missing));
  ASSERT_FALSE(g);
  EXPECT_NE(caf::to_string(g.error()).find("cuda:" + std::to_string(missing) + " is not a device"),
            std::string::npos)
      << caf::to_string(g.error());
}

trainer_options options(bool shard) {
  trainer_options o;
  o.optimizer.lr = 1e-2;
  o.optimizer.weight_decay = 0.01;
  o.optimizer.grad_clip = 0;   // the norm of slices rounds otherwise than the whole one's
  o.grad_bucket_bytes = 4096;  // many buckets on the tiny model
  o.micro_batch_tokens = 40;   // two micro-batches: one a rank with two ranks
  o.shard_optimizer = shard;
  return o;
}

at::Tensor train_on_cuda(trainer_options o, int steps) {
  policy_trainer t(
      llm::decoder::random(llm::testing::kTinyQwen3, at::kFloat, at::Device(at::kCUDA, 0), 5), o);
  for (int s = 0; s < steps; ++s) t.train(batch(s));
  return t.model().params().buffer().detach().cpu();
}

TEST(DataParallelCuda, AOneRankNcclGroupStepsAsNoGroupBitwise) {
  // Gradients summed (and, sharded, reduce-scattered and gathered) through NCCL: with one rank
  // every collective is a copy, so the weights are the plain run's bit for bit, on the GPU.
  if (cuda_devices() < 1) GTEST_SKIP() << "no CUDA device";
  const auto plain = train_on_cuda(options(false), 3);
  for (bool shard : {false, true}) {
    auto g = dist::make_collectives(one_rank(), at::Device(at::kCUDA, 0));
    ASSERT_TRUE(g) << caf::to_string(g.error());
    auto o = options(shard);
    o.group = g->get();
    EXPECT_TRUE(bitwise_equal(train_on_cuda(o, 3), plain)) << (shard ? "sharded" : "summed");
  }
  EXPECT_FALSE(
      bitwise_equal(plain, llm::decoder::random(llm::testing::kTinyQwen3, at::kFloat, at::kCPU, 5)
                               ->params()
                               .buffer()
                               .detach()));
}

TEST(DataParallelCuda, TwoRanksOnTwoGpusStepTogether) {
  // The trainer kind's ranks: threads of one process, rank r on cuda:r, NCCL between them. Two
  // ranks of one micro-batch each add g0 + g1 as one rank does: the weights equal the one-rank
  // run's within fp32 rounding of the GPU's reductions, and each other's bit for bit.
  if (cuda_devices() < 2)
    GTEST_SKIP() << "needs 2 GPUs (this machine has " << cuda_devices() << ")";
  const auto reference = train_on_cuda(options(false), 3);
  std::vector<at::Tensor> weights(2);
  auto make = [&](int rank, dist::collectives& group) {
    auto o = options(false);
    o.group = &group;
    return std::make_unique<policy_trainer>(
        llm::decoder::random(llm::testing::kTinyQwen3, at::kFloat,
                             rank_pool::device_of(at::Device(at::kCUDA, 0), rank), 5),
        o);
  };
  auto g = one_rank();
  g.world_size = 2;
  rank_pool pool(g, make, at::Device(at::kCUDA, 0));
  auto zero = make(0, pool.group());
  for (int s = 0; s < 3; ++s) {
    const auto b = batch(s);
    pool.run([&](policy_trainer& t) { t.train(b); }, [&] { zero->train(b); });
  }
  pool.run([&](policy_trainer& t) { weights[1] = t.model().params().buffer().detach().cpu(); },
           [&] { weights[0] = zero->model().params().buffer().detach().cpu(); });
  EXPECT_TRUE(bitwise_equal(weights[0], weights[1]));
  EXPECT_LE((weights[0] - reference).abs().max().item<double>(), 1e-5);
}

}  // namespace
}  // namespace milesrt::trainer
