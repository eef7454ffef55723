// Several ranks, each a process forked from this test, run the collectives through Gloo; every
// result is compared bit for bit with the same sums computed in one process.
#include "actors/lib/dist/collectives.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "actors/lib/dist/gloo_collectives.hpp"
#include "actors/lib/dist/testing_ranks.hpp"

namespace milesrt::dist {
namespace {

namespace fs = std::filesystem;
using testing::free_port;
using testing::run_ranks;

/// Rank r's input: random normals, or (exact) multiples of 1/1024 whose sums are exact in fp32
/// whatever order the library adds them in.
at::Tensor input(int rank, int64_t n, bool exact) {
  auto t = at::randn({n}, at::detail::createCPUGenerator(100 + rank));
  return exact ? at::round(t * 256) / 1024 : t;
}

void save(const at::Tensor& t, const fs::path& p) {
  auto c = t.contiguous();
  std::ofstream(p, std::ios::binary)
      .write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.nbytes()));
}

at::Tensor load(const fs::path& p, int64_t n) {
  auto t = at::empty({n}, at::kFloat);
  std::ifstream(p, std::ios::binary)
      .read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
  return t;
}

fs::path scratch(const std::string& name) {
  auto d = fs::temp_directory_path() / ("milesrt_dist_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

group_options options(uint16_t port, int rank, int world) {
  group_options o;
  o.port = port;
  o.rank = rank;
  o.world_size = world;
  o.join_timeout = std::chrono::seconds(30);
  o.op_timeout = std::chrono::seconds(30);
  return o;
}

/// Every collective once on `world` ranks; each rank saves what it got.
void run_every_collective(int world, int64_t n, bool exact, const fs::path& dir) {
  const uint16_t port = free_port();
  std::vector<int> ranks(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) ranks[static_cast<size_t>(r)] = r;
  auto reports = run_ranks(ranks, [&](int r) -> std::string {
    auto c = make_gloo_collectives(options(port, r, world));
    if (!c) return caf::to_string(c.error());
    auto mine = input(r, n, exact);
    auto a = mine.clone();
    (*c)->all_reduce(a);
    save(a, dir / ("all_reduce" + std::to_string(r)));
    auto rs = at::empty({n / world}, at::kFloat);
    (*c)->reduce_scatter(rs, mine);
    save(rs, dir / ("reduce_scatter" + std::to_string(r)));
    auto ag = at::empty({n * world}, at::kFloat);
    (*c)->all_gather(ag, mine);
    save(ag, dir / ("all_gather" + std::to_string(r)));
    auto b = mine.clone();
    (*c)->broadcast(b, world - 1);
    save(b, dir / ("broadcast" + std::to_string(r)));
    (*c)->barrier();
    return "";
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(reports[static_cast<size_t>(r)], "") << "rank " << r;
}

/// The single-process reference: the ranks' inputs added in rank order.
void expect_equal_to_one_process(int world, int64_t n, bool exact, const fs::path& dir) {
  auto sum = input(0, n, exact).clone();
  std::vector<at::Tensor> all{input(0, n, exact)};
  for (int r = 1; r < world; ++r) {
    sum.add_(input(r, n, exact));
    all.push_back(input(r, n, exact));
  }
  const int64_t slice = n / world;
  for (int r = 0; r < world; ++r) {
    const auto s = std::to_string(r);
    EXPECT_TRUE(at::equal(load(dir / ("all_reduce" + s), n), sum)) << "all_reduce, rank " << r;
    EXPECT_TRUE(at::equal(load(dir / ("reduce_scatter" + s), slice),
                          sum.slice(0, r * slice, (r + 1) * slice)))
        << "reduce_scatter, rank " << r;
    EXPECT_TRUE(at::equal(load(dir / ("all_gather" + s), n * world), at::cat(all)))
        << "all_gather, rank " << r;
    EXPECT_TRUE(at::equal(load(dir / ("broadcast" + s), n), input(world - 1, n, exact)))
        << "broadcast, rank " << r;
  }
}

TEST(Collectives, TwoRanksEqualOneProcessBitwise) {
  // Random fp32 values: with two ranks each sum is one addition, a + b = b + a exactly.
  auto dir = scratch("two");
  run_every_collective(2, 2 * 1003, false, dir);
  expect_equal_to_one_process(2, 2 * 1003, false, dir);
  fs::remove_all(dir);
}

TEST(Collectives, FourRanksEqualOneProcessOnExactSums) {
  // Four ranks add in an order of the library's choosing: values whose sums are exact make every
  // order agree, so the comparison stays bitwise.
  auto dir = scratch("four");
  run_every_collective(4, 4 * 257, true, dir);
  expect_equal_to_one_process(4, 4 * 257, true, dir);
  fs::remove_all(dir);
}

TEST(Collectives, RankThatNeverJoinsIsNamed) {
  const uint16_t port = free_port();
  auto reports = run_ranks({0, 1}, [&](int r) -> std::string {
    auto o = options(port, r, 3);  // rank 2 never starts
    o.join_timeout = std::chrono::milliseconds(1500);
    auto c = make_gloo_collectives(o);
    return c ? std::string("joined a group of 3 with two ranks") : caf::to_string(c.error());
  });
  ASSERT_EQ(reports.size(), 2u);
  // Rank 0 gives up at its deadline; rank 1 may see that first (the store closes).
  EXPECT_NE(reports[0].find("rank 0 of 3"), std::string::npos) << reports[0];
  EXPECT_NE(reports[0].find("rank 2 did not join within 1.5 s"), std::string::npos) << reports[0];
  EXPECT_NE(reports[1].find("rank 1 of 3"), std::string::npos) << reports[1];
  EXPECT_NE(reports[1].find("rank 2 did not join"), std::string::npos) << reports[1];
}

TEST(Collectives, MissingRankZeroIsNamed) {
  const uint16_t port = free_port();
  auto reports = run_ranks({1}, [&](int r) -> std::string {
    auto o = options(port, r, 2);
    o.join_timeout = std::chrono::milliseconds(1500);
    auto c = make_gloo_collectives(o);
    return c ? std::string("joined without rank 0") : caf::to_string(c.error());
  });
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_NE(reports[0].find("rank 1 of 2"), std::string::npos) << reports[0];
  EXPECT_NE(reports[0].find("rank 0's store was not reachable"), std::string::npos) << reports[0];
}

TEST(Collectives, RankThatDiesFailsTheCollective) {
  const uint16_t port = free_port();
  auto reports = run_ranks({0, 1}, [&](int r) -> std::string {
    auto o = options(port, r, 2);
    o.op_timeout = std::chrono::seconds(5);
    auto c = make_gloo_collectives(o);
    if (!c) return caf::to_string(c.error());
    // Both ranks have formed the group (a rank leaving while the other still connects fails the
    // group's forming instead); then rank 1 goes before the next collective.
    (*c)->barrier();
    if (r == 1) ::_exit(0);
    auto t = at::ones({64});
    try {
      (*c)->all_reduce(t);
    } catch (const collective_failed& e) {
      return e.what();
    }
    return "all_reduce returned without rank 1";
  });
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_NE(reports[0].find("gloo all_reduce failed on rank 0 of 2"), std::string::npos)
      << reports[0];
  EXPECT_EQ(reports[1], "");
}

TEST(Collectives, StorePortInUseIsRefused) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const uint16_t port = ntohs(a.sin_port);
  auto o = options(port, 0, 1);
  o.join_timeout = std::chrono::seconds(2);
  auto c = make_gloo_collectives(o);
  ::close(fd);
  ASSERT_FALSE(c);
  const auto msg = caf::to_string(c.error());
  EXPECT_NE(msg.find("port " + std::to_string(port) + " on 127.0.0.1 is in use"), msg.npos) << msg;
}

TEST(Collectives, OneRankGroupWorks) {
  auto o = options(free_port(), 0, 1);
  auto c = make_gloo_collectives(o);
  ASSERT_TRUE(c) << caf::to_string(c.error());
  EXPECT_STREQ((*c)->backend(), "gloo");
  auto t = at::arange(5, at::kFloat);
  (*c)->all_reduce(t);
  EXPECT_TRUE(at::equal(t, at::arange(5, at::kFloat)));
}

}  // namespace
}  // namespace milesrt::dist
