#include "actors/lib/weights/ipc.hpp"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>
#include <thread>

#include "actors/lib/weights/tensor_hash.hpp"

namespace milesrt::weights {
namespace {

constexpr uint64_t shm_magic = 0x316d68737472'6d6cull;  // "lmrtshm1"

struct shm_header {
  std::atomic<uint64_t> magic;
  std::atomic<uint64_t> seq;  ///< odd while a version is being written
  std::atomic<uint64_t> version;
  std::atomic<uint64_t> bytes;
  std::atomic<uint64_t> hash;
  std::atomic<uint64_t> capacity;
};
static_assert(sizeof(shm_header) <= shm_header_bytes);
static_assert(std::atomic<uint64_t>::is_always_lock_free, "the header is shared between processes");

std::string slash_name(std::string name) {
  return name.empty() || name[0] != '/' ? "/" + name : name;
}

std::string errno_text() { return std::strerror(errno); }

uint8_t* payload(void* map) { return static_cast<uint8_t*>(map) + shm_header_bytes; }

// A read-only mapping of a segment, unmapped on scope exit.
struct mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~mapping() {
    if (addr) ::munmap(addr, size);
  }
};

// Maps segment `name` for reading; false when it does not exist (yet) or is not set up yet.
bool map_segment(const std::string& name, mapping& m) {
  int fd = ::shm_open(name.c_str(), O_RDONLY, 0);
  if (fd < 0) {
    if (errno == ENOENT) return false;
    throw shm_error("shm segment '" + name + "': shm_open: " + errno_text());
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < shm_header_bytes) {
    ::close(fd);
    return false;
  }
  void* addr = ::mmap(nullptr, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (addr == MAP_FAILED) throw shm_error("shm segment '" + name + "': mmap: " + errno_text());
  m.addr = addr;
  m.size = st.st_size;
  return true;
}

}  // namespace

// -- publisher ---------------------------------------------------------------------------------

shm_publisher::shm_publisher(std::string name, size_t bytes)
    : name_(slash_name(std::move(name))), bytes_(bytes) {
  ::shm_unlink(name_.c_str());  // a segment left by a publisher that died
  int fd = ::shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) throw shm_error("shm segment '" + name_ + "': shm_open: " + errno_text());
  map_bytes_ = shm_header_bytes + bytes_;
  if (::ftruncate(fd, static_cast<off_t>(map_bytes_)) != 0) {
    std::string e = errno_text();
    ::close(fd);
    ::shm_unlink(name_.c_str());
    throw shm_error("shm segment '" + name_ + "': ftruncate to " + std::to_string(map_bytes_) +
                    " bytes: " + e);
  }
  map_ = ::mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    ::shm_unlink(name_.c_str());
    throw shm_error("shm segment '" + name_ + "': mmap: " + errno_text());
  }
  auto* h = new (map_) shm_header{};
  h->capacity.store(bytes_, std::memory_order_relaxed);
  h->magic.store(shm_magic, std::memory_order_release);
}

shm_publisher::~shm_publisher() {
  if (map_) ::munmap(map_, map_bytes_);
  ::shm_unlink(name_.c_str());
}

void shm_publisher::publish(const llm::flat_params& p, uint64_t version) {
  at::Tensor src = p.buffer().detach().contiguous().view(at::kByte);
  const size_t n = src.numel();
  if (n > bytes_)
    throw shm_error("shm segment '" + name_ + "': version " + std::to_string(version) + " is " +
                    std::to_string(n) + " bytes, the segment holds " + std::to_string(bytes_));
  auto* h = static_cast<shm_header*>(map_);
  const uint64_t s = h->seq.load(std::memory_order_relaxed);
  h->seq.store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);  // odd before any payload byte changes
  at::from_blob(payload(map_), {static_cast<int64_t>(n)}, at::TensorOptions().dtype(at::kByte))
      .copy_(src);  // from the GPU too
  h->version.store(version, std::memory_order_relaxed);
  h->bytes.store(n, std::memory_order_relaxed);
  h->hash.store(bytes_hash(payload(map_), n), std::memory_order_relaxed);
  h->seq.store(s + 2, std::memory_order_release);
}

// -- receiver ----------------------------------------------------------------------------------

shm_receiver::shm_receiver(std::string name) : name_(slash_name(std::move(name))) {}

uint64_t shm_receiver::apply(llm::flat_params& p, uint64_t want_version,
                             std::chrono::milliseconds deadline) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  const size_t want_bytes = p.buffer().nbytes();
  // Mapped again on each call: a publisher that restarted made a new segment under the name.
  mapping m;
  uint64_t newest = 0;
  bool seen = false;
  for (;;) {
    if (!m.addr) map_segment(name_, m);
    const auto* h = static_cast<const shm_header*>(m.addr);
    if (h && h->magic.load(std::memory_order_acquire) == shm_magic) {
      const uint64_t s1 = h->seq.load(std::memory_order_acquire);
      const uint64_t v = h->version.load(std::memory_order_relaxed);
      const uint64_t n = h->bytes.load(std::memory_order_relaxed);
      const uint64_t hash = h->hash.load(std::memory_order_relaxed);
      const bool stable = s1 >= 2 && s1 % 2 == 0;
      if (stable && v >= want_version && n == want_bytes && shm_header_bytes + n <= m.size) {
        if (!staged_.defined() || static_cast<size_t>(staged_.numel()) != n)
          staged_ = at::empty({static_cast<int64_t>(n)}, at::TensorOptions().dtype(at::kByte));
        std::memcpy(staged_.data_ptr(), payload(m.addr), n);
        std::atomic_thread_fence(std::memory_order_acquire);
        if (h->seq.load(std::memory_order_relaxed) == s1) {
          if (bytes_hash(staged_.data_ptr(), n) != hash)
            throw shm_error("shm segment '" + name_ + "': checksum mismatch in version " +
                            std::to_string(v));
          p.buffer().detach().copy_(staged_.view(p.buffer().scalar_type()));
          return v;
        }
      } else if (stable && v >= want_version && h->seq.load(std::memory_order_acquire) == s1) {
        throw shm_error("shm segment '" + name_ + "': version " + std::to_string(v) + " is " +
                        std::to_string(n) + " bytes, the model " + std::to_string(want_bytes));
      }
      if (stable) newest = v, seen = true;
    }
    if (std::chrono::steady_clock::now() >= end)
      throw shm_error("shm segment '" + name_ + "': version " + std::to_string(want_version) +
                      " did not arrive within " + std::to_string(deadline.count()) + " ms (" +
                      (!m.addr ? "no such segment"
                       : seen  ? "newest is version " + std::to_string(newest)
                               : "nothing published") +
                      ")");
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
}

// -- the transport -----------------------------------------------------------------------------

bool ipc_transport::publish(const published_version& v, weights_update& u) {
  const auto& b = v.weights->buffer();
  const std::string name = "/milesrt-" + std::to_string(::getpid()) + "-" + options_.publisher;
  if (!segment_) segment_ = std::make_unique<shm_publisher>(name, b.numel() * b.element_size());
  segment_->publish(*v.weights, v.version);
  u.location = segment_->name();
  return false;
}

apply_result ipc_transport::apply(llm::decoder& model, const weights_update& u,
                                  const apply_context&) {
  if (!reader_ || reader_location_ != u.location) {
    reader_ = std::make_unique<shm_receiver>(u.location);
    reader_location_ = u.location;
  }
  apply_result r;
  // The segment holds the newest version; in the async schedule that may already be a later
  // one than this update's, whose hashes then do not apply (it is verified by its checksum).
  r.verifiable =
      reader_->apply(model.mutable_published(), u.version, std::chrono::seconds(60)) == u.version;
  return r;
}

bool ipc_transport::serves(const weights_update& u) const {
  return u.transport == name() && u.location.rfind("cuda-ipc:", 0) != 0;
}

}  // namespace milesrt::weights
