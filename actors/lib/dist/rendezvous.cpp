#include "actors/lib/dist/rendezvous.hpp"

#include <arpa/inet.h>
#include <c10/util/Exception.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <caf/sec.hpp>
#include <cctype>
#include <cerrno>
#include <thread>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

namespace milesrt::dist {
namespace {

std::string joined_key(int rank) { return "milesrt/joined/" + std::to_string(rank); }

std::string seconds(std::chrono::milliseconds d) {
  auto s = std::to_string(d.count() / 1000.0);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s + " s";
}

bool says_port_in_use(std::string what) {
  std::transform(what.begin(), what.end(), what.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return what.find("eaddrinuse") != std::string::npos ||
         what.find("address already in use") != std::string::npos;
}

/// The first line of a c10 error: its message without the C++ backtrace.
std::string first_line(const std::string& what) { return what.substr(0, what.find('\n')); }

/// "rank 2" or "ranks 1, 2".
std::string ranks_named(const std::vector<int>& ranks) {
  std::string who = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) who += (i ? ", " : "") + std::to_string(ranks[i]);
  return who;
}

caf::error fail(std::string msg) {
  return caf::make_error(caf::sec::runtime_error, std::move(msg));
}

/// Binds a TCP socket to host:port; returns the bound port, or 0 with errno set.
uint16_t bind_port(const std::string& host, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (::inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host.c_str(), &a.sin_addr) != 1)
    a.sin_addr.s_addr = htonl(INADDR_ANY);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  uint16_t bound = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    socklen_t len = sizeof a;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) bound = ntohs(a.sin_port);
  }
  const int saved = errno;
  ::close(fd);
  errno = saved;
  return bound;
}

}  // namespace

uint16_t pick_free_port(const std::string& host) { return bind_port(host, 0); }

bool port_in_use(const std::string& host, uint16_t port) {
  errno = 0;
  return bind_port(host, port) == 0 && errno == EADDRINUSE;
}

std::string describe_rank(const group_options& o) {
  return "rank " + std::to_string(o.rank) + " of " + std::to_string(o.world_size) + " (store " +
         o.host + ":" + std::to_string(o.port) + ")";
}

caf::expected<c10::intrusive_ptr<c10d::Store>> rendezvous(const group_options& o) {
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size)
    return fail("rank " + std::to_string(o.rank) + " is outside a group of " +
                std::to_string(o.world_size));
  if (o.port == 0) return fail(describe_rank(o) + ": the store needs a port (not 0)");
  c10d::TCPStoreOptions so;
  so.port = o.port;
  so.isServer = o.rank == 0;
  so.numWorkers = static_cast<size_t>(o.world_size);
  so.waitWorkers = false;  // joining is checked below, naming who is missing
  so.timeout = o.join_timeout;
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(o.host, so);
  } catch (const std::exception& e) {
    if (o.rank == 0 && says_port_in_use(e.what()))
      return fail(describe_rank(o) + ": the store's port " + std::to_string(o.port) + " on " +
                  o.host + " is in use (choose another port)");
    if (o.rank == 0)
      return fail(describe_rank(o) + ": could not open the store: " + first_line(e.what()));
    return fail(describe_rank(o) + ": rank 0's store was not reachable within " +
                seconds(o.join_timeout) + ": " + first_line(e.what()));
  }
  const auto deadline = std::chrono::steady_clock::now() + o.join_timeout;
  std::vector<int> missing;
  try {
    store->set(joined_key(o.rank), std::vector<uint8_t>{1});
    for (;;) {
      std::vector<int> now;
      for (int r = 0; r < o.world_size; ++r)
        if (!store->check({joined_key(r)})) now.push_back(r);
      missing = std::move(now);
      if (missing.empty()) break;
      if (std::chrono::steady_clock::now() >= deadline)
        return fail(describe_rank(o) + ": " + ranks_named(missing) + " did not join within " +
                    seconds(o.join_timeout));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    store->setTimeout(o.op_timeout);
  } catch (const std::exception& e) {
    // Rank 0 gave up (its own deadline) or died while this rank was waiting.
    if (!missing.empty())
      return fail(describe_rank(o) + ": " + ranks_named(missing) +
                  " did not join before rank 0's store closed");
    return fail(describe_rank(o) + ": lost the store while joining: " + first_line(e.what()));
  }
  return store;
}

}  // namespace milesrt::dist
