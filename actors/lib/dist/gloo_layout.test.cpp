// Gloo's headers come from Debian's libgloo-dev (a 2022 snapshot); the code they describe is the
// Gloo compiled into libtorch_cpu.so. This test shows that what ProcessGroupGloo's header exposes
// has the layout libtorch built it with: objects we allocate from the header's sizes are written
// by libtorch's constructors without a byte past their end, libtorch's values are read back at
// the header's offsets, and a round trip of every collective through the class itself is right.
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO 1
#endif
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstring>
#include <sstream>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "actors/lib/dist/testing_ranks.hpp"

namespace milesrt::dist {
namespace {

using c10d::ProcessGroupGloo;
constexpr size_t kPad = 512;
constexpr unsigned char kCanary = 0xA5;

/// Builds a T in a buffer kPad bytes longer than the header says T is, the tail filled with a
/// canary; libtorch's constructor (out of line, compiled with its own Gloo) must leave it alone.
template <class T, class... A>
c10::intrusive_ptr<T> make_padded(A&&... args) {
  void* raw = ::operator new(sizeof(T) + kPad);
  std::memset(raw, kCanary, sizeof(T) + kPad);
  return c10::intrusive_ptr<T>::unsafe_steal_from_new(new (raw) T(std::forward<A>(args)...));
}

template <class T>
bool tail_intact(const T* p) {
  const auto* b = reinterpret_cast<const unsigned char*>(p) + sizeof(T);
  for (size_t i = 0; i < kPad; ++i)
    if (b[i] != kCanary) return false;
  return true;
}

/// One rank: the group formed through the class itself, every collective once, and the checks.
std::string rank_body(uint16_t port, int rank) {
  std::ostringstream bad;
  c10d::TCPStoreOptions so;
  so.port = port;
  so.isServer = rank == 0;
  so.numWorkers = 2;
  so.timeout = std::chrono::seconds(30);
  auto tcp = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", so);
  auto store = c10::make_intrusive<c10d::PrefixStore>("layout", tcp);
  auto opts = make_padded<ProcessGroupGloo::Options>(std::chrono::milliseconds(30000));
  opts->devices.push_back(ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  opts->threads = 3;  // not the default 2: read back below through the group
  auto pg = make_padded<ProcessGroupGloo>(store, rank, 2, opts);
  if (!tail_intact(opts.get())) bad << "Options written past the header's size; ";
  if (!tail_intact(pg.get())) bad << "ProcessGroupGloo written past the header's size; ";
  // Inline accessors read libtorch's members at the header's offsets.
  if (pg->getNumThreads() != 3) bad << "threads read back as " << pg->getNumThreads() << "; ";
  if (pg->getRank() != rank || pg->getSize() != 2) bad << "rank/size read back wrong; ";
  if (pg->getBackendName() != "gloo") bad << "backend name " << pg->getBackendName() << "; ";
  auto* glue = static_cast<ProcessGroupGloo::GlooStore*>(pg->_getStore().get());
  if (glue == nullptr || glue->_getStore().get() != store.get())
    bad << "the GlooStore does not hold our store at the header's offset; ";

  const int64_t n = 2 * 501;
  auto mine = at::randn({n}, at::detail::createCPUGenerator(7 + rank));
  auto other = at::randn({n}, at::detail::createCPUGenerator(7 + (1 - rank)));
  auto sum = rank == 0 ? mine + other : other + mine;
  std::vector<at::Tensor> ar{mine.clone()};
  pg->allreduce(ar)->wait();
  if (!at::equal(ar[0], sum)) bad << "allreduce; ";
  auto ag = at::empty({2 * n});
  pg->_allgather_base(ag, mine)->wait();
  if (!at::equal(ag, rank == 0 ? at::cat({mine, other}) : at::cat({other, mine})))
    bad << "allgather; ";
  auto rs = at::empty({n / 2});
  auto in = mine.clone();
  pg->_reduce_scatter_base(rs, in)->wait();
  if (!at::equal(rs, sum.slice(0, rank * n / 2, (rank + 1) * n / 2))) bad << "reduce_scatter; ";
  std::vector<at::Tensor> bc{mine.clone()};
  c10d::BroadcastOptions bo;
  bo.rootRank = 1;
  pg->broadcast(bc, bo)->wait();
  if (!at::equal(bc[0], rank == 1 ? mine : other)) bad << "broadcast; ";
  pg->barrier()->wait();
  if (!tail_intact(opts.get()) || !tail_intact(pg.get())) bad << "a tail changed after use; ";
  return bad.str();
}

TEST(GlooLayout, DebianHeadersAgreeWithTheWheelsGloo) {
  RecordProperty("sizeof_ProcessGroupGloo", static_cast<int>(sizeof(ProcessGroupGloo)));
  RecordProperty("sizeof_Options", static_cast<int>(sizeof(ProcessGroupGloo::Options)));
  RecordProperty("sizeof_GlooStore", static_cast<int>(sizeof(ProcessGroupGloo::GlooStore)));
  const uint16_t port = testing::free_port();
  auto reports = testing::run_ranks({0, 1}, [&](int r) { return rank_body(port, r); });
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0], "");
  EXPECT_EQ(reports[1], "");
}

}  // namespace
}  // namespace milesrt::dist
