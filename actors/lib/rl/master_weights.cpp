#include "actors/lib/rl/master_weights.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

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

}  // namespace milesrt::rl
