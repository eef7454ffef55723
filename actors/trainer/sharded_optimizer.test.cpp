// ZeRO-1 (trainer_options::shard_optimizer): two ranks, each with half the master weights and
// AdamW moments, against the unsharded run; the per-rank optimizer bytes; a sharded checkpoint
// resumed with the same ranks and refused with others.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>

#include "actors/lib/dist/gloo_collectives.hpp"
#include "actors/lib/dist/rendezvous.hpp"
#include "actors/lib/llm/tiny_model_testing.hpp"
#include "actors/lib/rl/master_weights.hpp"
#include "actors/trainer/rank_test_batch.hpp"
#include "actors/trainer/trainer_core.hpp"

namespace milesrt::trainer {
namespace {
using testing::batch;
using testing::bitwise_equal;
using testing::seq;
namespace fs = std::filesystem;

trainer_options options(double grad_clip) {
  trainer_options o;
  o.optimizer.lr = 1e-2;
  o.optimizer.weight_decay = 0.01;
  o.optimizer.grad_clip = grad_clip;
  o.micro_batch_tokens = 45;
  return o;
}

/// What one rank saw: its weights after the steps, its last step's metrics, an error.
struct rank_result {
  at::Tensor weights;
  std::map<std::string, double> metrics;
  std::string error;
};

/// `world` ranks (threads, Gloo between them), each running `body` on its own trainer.
std::vector<rank_result> ranks(int world, bool shard, double grad_clip,
                               const std::function<void(policy_trainer&, rank_result&)>& body) {
  const uint16_t port = dist::pick_free_port();
  std::vector<rank_result> out(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      auto& mine = out[static_cast<size_t>(r)];
      try {
        at::set_num_threads(1);
        dist::group_options g;
        g.port = port;
        g.rank = r;
        g.world_size = world;
        auto group = dist::make_gloo_collectives(g);
        if (!group) throw std::runtime_error(caf::to_string(group.error()));
        auto o = options(grad_clip);
        o.group = group->get();
        o.shard_optimizer = shard;
        policy_trainer t(llm::testing::tiny_model(5), o);
        body(t, mine);
        mine.weights = t.model().params().buffer().detach().clone();
      } catch (const std::exception& e) {
        mine.error = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

void train_steps(policy_trainer& t, rank_result& r, int from, int to) {
  for (int s = from; s < to; ++s) r.metrics = t.train(batch(s));
}

TEST(ShardedOptimizer, TwoRanksEqualUnshardedBitwiseWithoutClipping) {
  // Each rank steps its slice with the same element-wise arithmetic as the whole buffer (slices
  // start at multiples of 64 values), and the reduce-scatter adds g0 + g1 as the all-reduce does:
  // with clipping off the weights are the unsharded run's, bit for bit.
  at::set_num_threads(1);
  auto body = [](policy_trainer& t, rank_result& r) { train_steps(t, r, 0, 3); };
  const auto plain = ranks(2, false, 0.0, body);
  const auto sharded = ranks(2, true, 0.0, body);
  policy_trainer one(llm::testing::tiny_model(5), options(0.0));
  for (int s = 0; s < 3; ++s) one.train(batch(s));
  const auto reference = one.model().params().buffer().detach();
  for (size_t r = 0; r < 2; ++r) {
    ASSERT_EQ(plain[r].error, "") << "rank " << r;
    ASSERT_EQ(sharded[r].error, "") << "rank " << r;
    EXPECT_TRUE(bitwise_equal(plain[r].weights, reference)) << "rank " << r;
    EXPECT_TRUE(bitwise_equal(sharded[r].weights, reference)) << "rank " << r;
  }
  ASSERT_FALSE(bitwise_equal(reference, llm::testing::tiny_model(5)->params().buffer()));
}

TEST(ShardedOptimizer, WithClippingEqualUnshardedBitwiseGradNormIncluded) {
  // The norm behind the clipping factor is summed alike from the whole gradient and from the
  // ranks' slices (rl::global_l2_norm: fp64 blocks of 64 values, fixed pairwise trees), so with
  // clipping acting the sharded run's grad_norm and weights are the unsharded run's, bit for bit,
  // every step; and the 1-rank trainer's.
  auto body = [](policy_trainer& t, rank_result& r) {
    std::map<std::string, double> norms;
    for (int s = 0; s < 3; ++s)
      norms["grad_norm/" + std::to_string(s)] = t.train(batch(s)).at("grad_norm");
    r.metrics = std::move(norms);
  };
  const auto plain = ranks(2, false, 0.05, body);
  const auto sharded = ranks(2, true, 0.05, body);
  at::set_num_threads(1);
  policy_trainer one(llm::testing::tiny_model(5), options(0.05));
  std::vector<double> one_norms;
  for (int s = 0; s < 3; ++s) one_norms.push_back(one.train(batch(s)).at("grad_norm"));
  for (size_t r = 0; r < 2; ++r) {
    ASSERT_EQ(plain[r].error, "") << "rank " << r;
    ASSERT_EQ(sharded[r].error, "") << "rank " << r;
  }
  ASSERT_GT(plain[0].metrics.at("grad_norm/0"), 0.05) << "the test needs clipping to act";
  for (int s = 0; s < 3; ++s) {
    const std::string key = "grad_norm/" + std::to_string(s);
    EXPECT_EQ(sharded[0].metrics.at(key), plain[0].metrics.at(key)) << "step " << s;
    EXPECT_EQ(sharded[1].metrics.at(key), plain[0].metrics.at(key)) << "step " << s;
    EXPECT_EQ(one_norms[size_t(s)], plain[0].metrics.at(key)) << "step " << s;
  }
  EXPECT_TRUE(bitwise_equal(sharded[0].weights, plain[0].weights));
  EXPECT_TRUE(bitwise_equal(sharded[1].weights, plain[0].weights));
  EXPECT_TRUE(bitwise_equal(one.model().params().buffer().detach(), plain[0].weights));
}

TEST(ShardedOptimizer, EachRankHoldsAboutHalfTheOptimizerBytes) {
  at::set_num_threads(1);
  auto body = [](policy_trainer& t, rank_result& r) { train_steps(t, r, 0, 1); };
  const auto plain = ranks(2, false, 1.0, body);
  const auto sharded = ranks(2, true, 1.0, body);
  ASSERT_EQ(sharded[0].error, "");
  ASSERT_EQ(sharded[1].error, "");
  const double whole = plain[0].metrics.at("trainer_optimizer_master_bytes");
  const double n = plain[0].metrics.at("trainer_trained_params");
  EXPECT_EQ(whole, 12 * n);
  double sum = 0;
  for (const auto& r : sharded) {
    const double bytes = r.metrics.at("trainer_optimizer_master_bytes");
    EXPECT_NEAR(bytes / whole, 0.5, 64.0 * 12 / whole);  // slices are multiples of 64 values
    EXPECT_EQ(r.metrics.at("trainer_optimizer_shards"), 2);
    sum += bytes;
  }
  EXPECT_EQ(sum, whole);
}

TEST(ShardedOptimizer, ACheckpointResumesPerShardAndIsRefusedWithOtherRanks) {
  at::set_num_threads(1);
  const fs::path dir = fs::temp_directory_path() / ("milesrt-zero1-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const auto whole =
      ranks(2, true, 1.0, [](policy_trainer& t, rank_result& r) { train_steps(t, r, 0, 3); });
  const auto first = ranks(2, true, 1.0, [&](policy_trainer& t, rank_result& r) {
    train_steps(t, r, 0, 1);
    t.save(dir);
  });
  ASSERT_EQ(first[0].error, "");
  ASSERT_EQ(first[1].error, "");
  EXPECT_TRUE(fs::exists(dir / "optimizer.rank-0-of-2.bin"));
  EXPECT_TRUE(fs::exists(dir / "master.rank-1-of-2.bin"));
  EXPECT_FALSE(fs::exists(dir / "optimizer.bin"));
  const auto resumed = ranks(2, true, 1.0, [&](policy_trainer& t, rank_result& r) {
    t.load(dir);
    train_steps(t, r, 1, 3);
  });
  for (size_t r = 0; r < 2; ++r) {
    ASSERT_EQ(resumed[r].error, "") << "rank " << r;
    EXPECT_TRUE(bitwise_equal(resumed[r].weights, whole[r].weights)) << "rank " << r;
  }
  // Another number of ranks, or no sharding, is refused naming the ranks that wrote it.
  const auto three = ranks(3, true, 1.0, [&](policy_trainer& t, rank_result&) { t.load(dir); });
  EXPECT_NE(three[0].error.find("sharded over 2 ranks, this trainer has dataParallel = 3"),
            std::string::npos)
      << three[0].error;
  policy_trainer alone(llm::testing::tiny_model(5), options(1.0));
  try {
    alone.load(dir);
    ADD_FAILURE() << "an unsharded trainer loaded a sharded checkpoint";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("resume it with dataParallel = 2"), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

TEST(ShardedOptimizer, SlicesStartAtMultiplesOf64AndCoverTheBuffer) {
  for (int world : {1, 2, 3, 4}) {
    int64_t covered = 0;
    for (int r = 0; r < world; ++r) {
      const auto s = rl::shard_of(1000, r, world);
      EXPECT_EQ(s.stride % 64, 0);
      EXPECT_GE(s.stride * world, 1000);
      EXPECT_EQ(s.begin, std::min<int64_t>(1000, r * s.stride));
      covered += s.length();
    }
    EXPECT_EQ(covered, 1000) << world;
  }
}

}  // namespace
}  // namespace milesrt::trainer
