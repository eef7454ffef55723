#include "actors/lib/weights/ipc.hpp"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "actors/lib/weights/tensor_hash.hpp"

extern char** environ;

namespace milesrt::weights {
namespace {
using namespace std::chrono_literals;

const std::vector<std::pair<std::string, std::vector<int64_t>>> specs = {
    {"embed", {64, 32}}, {"layers.0.w", {32, 33}}, {"norm", {31}}};

llm::flat_params make_params(uint64_t seed) {
  llm::flat_params p(specs, at::kFloat, at::kCPU);
  if (seed) {
    at::manual_seed(seed);
    p.buffer().detach().copy_(at::randn({p.buffer().numel()}));
  }
  return p;
}

std::string segment_name(const char* what) {
  return "/milesrt_ipc_test_" + std::to_string(::getpid()) + "_" + what;
}

std::string join_hashes(const std::vector<uint64_t>& h) {
  std::ostringstream s;
  for (auto x : h) s << x << ',';
  return s.str();
}

void expect_throw_with(const std::function<void()>& f, const std::vector<std::string>& words) {
  try {
    f();
    ADD_FAILURE() << "no shm_error";
  } catch (const shm_error& e) {
    for (const auto& w : words)
      EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what() << " lacks " << w;
  }
}

// The child half of Ipc.TwoProcessesRoundTrip: run by it (re-executing this binary with the
// segment's name in MILESRT_IPC_SEGMENT), skipped otherwise.
TEST(IpcChild, AppliesFromParent) {
  const char* seg = std::getenv("MILESRT_IPC_SEGMENT");
  if (!seg) GTEST_SKIP() << "run as a child process by Ipc.TwoProcessesRoundTrip";
  auto p = make_params(0);
  shm_receiver r(seg);
  EXPECT_EQ(r.apply(p, 3, 20s), 3u);
  EXPECT_EQ(join_hashes(param_hashes(p)), std::getenv("MILESRT_IPC_HASHES"));
}

TEST(Ipc, TwoProcessesRoundTrip) {
  std::vector<llm::flat_params> versions;
  for (uint64_t v = 1; v <= 3; ++v) versions.push_back(make_params(100 + v));
  const std::string name = segment_name("round_trip");
  shm_publisher pub(name, versions[0].buffer().nbytes());
  pub.publish(versions[0], 1);

  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.push_back(*e);
  env.push_back("MILESRT_IPC_SEGMENT=" + name);
  env.push_back("MILESRT_IPC_HASHES=" + join_hashes(param_hashes(versions[2])));
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe", filter = "--gtest_filter=IpcChild.AppliesFromParent";
  char* argv[] = {exe.data(), filter.data(), nullptr};
  pid_t child = 0;
  ASSERT_EQ(::posix_spawn(&child, exe.c_str(), nullptr, nullptr, argv, envp.data()), 0);

  // The child waits for version 3 while older ones come and go.
  std::this_thread::sleep_for(100ms);
  pub.publish(versions[1], 2);
  std::this_thread::sleep_for(100ms);
  pub.publish(versions[2], 3);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's check failed (its output is above)";
}

TEST(Ipc, NeverAppliesATornCopy) {
  auto a = make_params(7), b = make_params(8);
  const auto ha = param_hashes(a), hb = param_hashes(b);
  const std::string name = segment_name("torn");
  shm_publisher pub(name, a.buffer().nbytes());
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> published{0};
  std::thread writer([&] {
    for (uint64_t v = 1; !stop; ++v) {
      pub.publish(v % 2 ? a : b, v);
      published = v;
    }
  });
  auto p = make_params(0);
  shm_receiver r(name);
  uint64_t want = 1;
  for (int i = 0; i < 50; ++i) {
    uint64_t v = r.apply(p, want, 10s);
    ASSERT_GE(v, want);
    ASSERT_EQ(param_hashes(p), v % 2 ? ha : hb) << "version " << v;
    want = v + 1;
  }
  stop = true;
  writer.join();
}

TEST(Ipc, TimeoutSizeAndChecksumErrorsNameTheSegment) {
  auto p = make_params(9);
  const auto before = param_hashes(p);
  const std::string name = segment_name("errors");
  expect_throw_with([&] { shm_receiver(name).apply(p, 1, 20ms); }, {name, "no such segment"});
  {
    shm_publisher pub(name, p.buffer().nbytes() + 64);
    expect_throw_with([&] { shm_receiver(name).apply(p, 1, 20ms); }, {name, "nothing published"});
    auto q = make_params(10);
    pub.publish(q, 4);
    expect_throw_with([&] { shm_receiver(name).apply(p, 5, 20ms); },
                      {name, "version 5", "newest is version 4"});
    llm::flat_params other({{"x", {5}}}, at::kFloat, at::kCPU);
    expect_throw_with([&] { shm_receiver(name).apply(other, 4, 20ms); }, {name, "bytes"});

    // One flipped payload byte, as a faulty writer would leave it.
    int fd = ::shm_open(name.c_str(), O_RDWR, 0);
    ASSERT_GE(fd, 0);
    void* m = ::mmap(nullptr, shm_header_bytes + 16, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    ASSERT_NE(m, MAP_FAILED);
    static_cast<uint8_t*>(m)[shm_header_bytes + 10] ^= 0x40;
    ::munmap(m, shm_header_bytes + 16);
    expect_throw_with([&] { shm_receiver(name).apply(p, 4, 1s); }, {name, "checksum"});
    EXPECT_EQ(param_hashes(p), before);

    pub.publish(q, 5);
    EXPECT_EQ(shm_receiver(name).apply(p, 5, 1s), 5u);
    EXPECT_EQ(param_hashes(p), param_hashes(q));
    llm::flat_params big({{"x", {100000}}}, at::kFloat, at::kCPU);
    expect_throw_with([&] { pub.publish(big, 6); }, {name, "version 6"});
  }
  errno = 0;
  EXPECT_LT(::shm_open(name.c_str(), O_RDONLY, 0), 0);  // unlinked by the publisher
  EXPECT_EQ(errno, ENOENT);
}

}  // namespace
}  // namespace milesrt::weights
