#include "actors/lib/rl/master_weights.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <vector>

namespace milesrt::rl {
namespace fs = std::filesystem;

namespace {

/// ": <reason>" from errno after a failed write (a full disk, a file-size limit), or nothing.
std::string why_not() {
  return errno != 0 ? std::string(": ") + std::strerror(errno) : std::string();
}

void write_bytes(const fs::path& path, const void* data, size_t n) {
  errno = 0;
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  out.flush();
  if (!out) throw std::runtime_error("cannot write " + path.string() + why_not());
}

}  // namespace

at::Tensor fp32_master(const at::Tensor& buffer) {
  return buffer.scalar_type() == at::kFloat ? buffer.detach()
                                            : buffer.detach().to(at::kFloat).clone();
}

bool all_finite(const at::Tensor& t) {
  at::NoGradGuard no_grad;
  if (std::isfinite(t.detach().sum(at::kFloat).item<double>())) return true;
  return at::isfinite(t.detach()).all().item<bool>();  // an overflowing sum of finite values
}

void check_finite_weights(const at::Tensor& weights, const at::Tensor& nonfinite_flag,
                          const std::string& who, uint64_t step, const std::string& tail) {
  if (!nonfinite_flag.defined()) return check_finite_weights(weights, who, step, tail);
  if (nonfinite_flag.item<int32_t>() != 0) {
    throw std::runtime_error(who + ": the weights are no longer finite after optimizer step " +
                             std::to_string(step) + tail);
  }
}

void check_finite_weights(const at::Tensor& weights, const std::string& who, uint64_t step,
                          const std::string& tail) {
  if (!all_finite(weights)) {
    throw std::runtime_error(who + ": the weights are no longer finite after optimizer step " +
                             std::to_string(step) + tail);
  }
}

void save_optimizer_state(const fs::path& dir, const adamw& adam, const at::Tensor& master,
                          bool with_master) {
  auto bytes = adam.save();
  write_bytes(dir / "optimizer.bin", bytes.data(), bytes.size());
  if (with_master) {
    auto cpu = master.to(at::kCPU).contiguous();
    write_bytes(dir / "master.bin", cpu.data_ptr(), cpu.nbytes());
  }
}

void load_optimizer_state(const fs::path& dir, adamw& adam) {
  if (!fs::exists(dir / "optimizer.bin")) {
    if (const int m = checkpoint_shards(dir); m > 0)
      throw std::runtime_error(dir.string() + ": the optimizer state was sharded over " +
                               std::to_string(m) + " ranks (" + shard_file("optimizer", 0, m) +
                               "); resume it with dataParallel = " + std::to_string(m) +
                               " and shardOptimizer = true");
  }
  std::ifstream in(dir / "optimizer.bin", std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + (dir / "optimizer.bin").string());
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  adam.load(bytes);
}

at::Tensor read_master(const fs::path& dir, int64_t numel) {
  const fs::path file = dir / "master.bin";
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + file.string());
  // Read in place (no second host copy of what may be a large model's weights).
  auto master = at::empty({numel}, at::kFloat);
  const auto want = static_cast<std::streamsize>(numel * 4);
  in.read(static_cast<char*>(master.data_ptr()), want);
  if (in.gcount() != want || in.peek() != std::char_traits<char>::eof()) {
    throw std::runtime_error(file.string() + ": expected " + std::to_string(numel * 4) +
                             " bytes of fp32 master weights");
  }
  return master;
}

shard_range shard_of(int64_t numel, int rank, int world) {
  constexpr int64_t align = 64;
  const int64_t w = std::max(1, world);
  shard_range r;
  r.stride = std::max<int64_t>(align, (numel + w * align - 1) / (w * align) * align);
  r.begin = std::min<int64_t>(numel, rank * r.stride);
  r.end = std::min<int64_t>(numel, r.begin + r.stride);
  return r;
}

std::string shard_file(const std::string& what, int rank, int world) {
  return what + ".rank-" + std::to_string(rank) + "-of-" + std::to_string(world) + ".bin";
}

int checkpoint_shards(const fs::path& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string head = "optimizer.rank-0-of-";
    if (name.rfind(head, 0) != 0 || name.size() <= head.size() + 4) continue;
    try {
      return std::stoi(name.substr(head.size()));
    } catch (const std::exception&) {
      continue;
    }
  }
  return 0;
}

void save_optimizer_shard(const fs::path& dir, const adamw& adam, const at::Tensor& master,
                          int rank, int world) {
  auto bytes = adam.save();
  write_bytes(dir / shard_file("optimizer", rank, world), bytes.data(), bytes.size());
  auto cpu = master.to(at::kCPU).contiguous();
  write_bytes(dir / shard_file("master", rank, world), cpu.data_ptr(), cpu.nbytes());
}

void load_optimizer_shard(const fs::path& dir, adamw& adam, at::Tensor& master, int rank,
                          int world) {
  const int saved = checkpoint_shards(dir);
  if (saved == 0)
    throw std::runtime_error(
        dir.string() + ": the checkpoint's optimizer state is not sharded (no " +
        shard_file("optimizer", 0, world) + "); this trainer shards it over " +
        std::to_string(world) + " ranks: resume it with shardOptimizer = false");
  if (saved != world)
    throw std::runtime_error(
        dir.string() + ": the optimizer state was sharded over " + std::to_string(saved) +
        " ranks, this trainer has dataParallel = " + std::to_string(world) +
        " (resume it with dataParallel = " + std::to_string(saved) + "; resharding is not built)");
  const fs::path opt = dir / shard_file("optimizer", rank, world);
  std::ifstream in(opt, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + opt.string());
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  adam.load(bytes);
  const fs::path file = dir / shard_file("master", rank, world);
  std::ifstream m(file, std::ios::binary);
  if (!m) throw std::runtime_error("cannot read " + file.string());
  auto cpu = at::empty({master.numel()}, at::kFloat);
  const auto want = static_cast<std::streamsize>(master.numel() * 4);
  m.read(static_cast<char*>(cpu.data_ptr()), want);
  if (m.gcount() != want || m.peek() != std::char_traits<char>::eof())
    throw std::runtime_error(file.string() + ": expected " + std::to_string(want) +
                             " bytes of fp32 master weights");
  at::NoGradGuard no_grad;
  master.copy_(cpu.view(master.sizes()));
}

}  // namespace milesrt::rl
