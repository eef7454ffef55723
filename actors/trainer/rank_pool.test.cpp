// The trainer's data-parallel ranks as threads (rank_pool): a step on every rank equals the
// 1-rank step bitwise, a rank that fails mid-step ends the step naming it, one that cannot start is
// named, and a store port in use is refused.
#include "actors/trainer/rank_pool.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "actors/lib/dist/rendezvous.hpp"
#include "actors/lib/llm/tiny_model_testing.hpp"
#include "actors/trainer/rank_test_batch.hpp"
#include "actors/trainer/trainer_core.hpp"

namespace milesrt::trainer {
namespace {
using testing::batch;
using testing::bitwise_equal;
using testing::seq;

trainer_options options() {
  trainer_options o;
  o.optimizer.lr = 1e-2;
  o.micro_batch_tokens = 45;  // two micro-batches: one a rank
  return o;
}

dist::group_options group_of(int world) {
  dist::group_options g;
  g.port = dist::pick_free_port();
  g.world_size = world;
  g.join_timeout = std::chrono::milliseconds(5000);
  g.op_timeout = std::chrono::milliseconds(5000);
  return g;
}

rank_pool::factory tiny_ranks() {
  return [](int, dist::collectives& group) {
    auto o = options();
    o.group = &group;
    return std::make_unique<policy_trainer>(llm::testing::tiny_model(5), o);
  };
}

TEST(RankPool, TwoRanksStepTogetherAsOneRank) {
  at::set_num_threads(1);
  policy_trainer one(llm::testing::tiny_model(5), options());
  for (int s = 0; s < 2; ++s) one.train(batch(s));
  rank_pool pool(group_of(2), tiny_ranks());
  auto o = options();
  o.group = &pool.group();
  policy_trainer rank0(llm::testing::tiny_model(5), o);
  at::Tensor rank1;
  for (int s = 0; s < 2; ++s) {
    const auto b = batch(s);
    pool.run([&](policy_trainer& t) { t.train(b); }, [&] { rank0.train(b); });
  }
  pool.run([&](policy_trainer& t) { rank1 = t.model().params().buffer().detach().clone(); }, [] {});
  const auto& want = one.model().params().buffer();
  EXPECT_EQ(std::memcmp(rank0.model().params().buffer().data_ptr(), want.data_ptr(), want.nbytes()),
            0);
  ASSERT_TRUE(rank1.defined());
  EXPECT_EQ(std::memcmp(rank1.data_ptr(), want.data_ptr(), want.nbytes()), 0);
}

TEST(RankPool, ARankThatDiesMidStepIsNamedAndThePoolStaysBroken) {
  at::set_num_threads(1);
  rank_pool pool(group_of(2), tiny_ranks());
  // Rank 1 takes part in the first collective, then dies (its thread ends and its connections
  // close); rank 0 is waiting in the second.
  try {
    pool.run(
        [](policy_trainer& t) {
          auto x = at::ones({4});
          t.options().group->all_reduce(x);
          throw std::runtime_error("out of memory (simulated by the test)");
        },
        [&] {
          auto x = at::ones({4});
          pool.group().all_reduce(x);
          pool.group().all_reduce(x);
        });
    ADD_FAILURE() << "the step succeeded without rank 1";
  } catch (const std::exception& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 1 of 2 (store 127.0.0.1:"), std::string::npos) << what;
    EXPECT_NE(what.find("died mid-step: out of memory (simulated by the test)"), std::string::npos)
        << what;
  }
  try {
    pool.run([](policy_trainer&) {}, [] {});
    ADD_FAILURE() << "a broken pool ran a step";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("the data-parallel group is broken: rank 1 of 2"),
              std::string::npos)
        << e.what();
  }
}

TEST(RankPool, ARankThatCannotStartIsNamed) {
  at::set_num_threads(1);
  rank_pool pool(group_of(3), [](int rank, dist::collectives& group) {
    if (rank == 2) throw std::runtime_error("no such model folder (simulated by the test)");
    auto o = options();
    o.group = &group;
    return std::make_unique<policy_trainer>(llm::testing::tiny_model(5), o);
  });
  try {
    pool.run([](policy_trainer&) {}, [] {});
    ADD_FAILURE() << "a step ran without rank 2";
  } catch (const std::exception& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 2 of 3"), std::string::npos) << what;
    EXPECT_NE(what.find("could not start: no such model folder"), std::string::npos) << what;
  }
}

TEST(RankPool, RanksOnMoreGpusThanTheMachineHasAreRefusedBeforeAnyStarts) {
  // Rank r runs on the r-th GPU: a group wider than the machine fails at once, naming the device,
  // rather than in a rank's thread after rank 0 has waited for it.
  const int have = at::hasCUDA() ? static_cast<int>(at::getNumGPUs()) : 0;
  auto g = group_of(have + 1);
  bool made = false;
  try {
    rank_pool pool(
        g,
        [&](int, dist::collectives&) -> std::unique_ptr<policy_trainer> {
          made = true;
          return nullptr;
        },
        at::Device(at::kCUDA, 0));
    ADD_FAILURE() << "a group of " << have + 1 << " ranks started on " << have << " GPUs";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:" + std::to_string(have) +
                                         " is not a device of this machine (it has " +
                                         std::to_string(have) + ")"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(made);
}

TEST(RankPool, AStorePortInUseIsRefused) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  auto g = group_of(2);
  g.port = ntohs(a.sin_port);
  g.join_timeout = std::chrono::milliseconds(1500);
  EXPECT_TRUE(dist::port_in_use("127.0.0.1", g.port));
  try {
    rank_pool pool(g, tiny_ranks());
    ADD_FAILURE() << "the ranks met on a port in use";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("is in use"), std::string::npos) << e.what();
  }
  ::close(fd);
  EXPECT_FALSE(dist::port_in_use("127.0.0.1", g.port));
}

}  // namespace
}  // namespace milesrt::trainer
