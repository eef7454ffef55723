#include "actors/lib/weights/tensor_hash.hpp"

#include <ATen/ATen.h>
#include <xxhash.h>

#include <cstdio>
#include <memory>

namespace milesrt::weights {

at::Tensor cpu_contiguous(const at::Tensor& t) { return t.detach().to(at::kCPU).contiguous(); }

uint64_t bytes_hash(const void* data, size_t n) { return XXH3_64bits(data, n); }

namespace {

// Hashes a CPU contiguous tensor: dtype, rank, sizes, then the bytes.
uint64_t hash_cpu(const at::Tensor& c) {
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> st(XXH3_createState(), &XXH3_freeState);
  TORCH_CHECK(st, "tensor_hash: XXH3_createState failed");
  XXH3_64bits_reset(st.get());
  int64_t head[2] = {static_cast<int64_t>(c.scalar_type()), c.dim()};
  XXH3_64bits_update(st.get(), head, sizeof(head));
  for (int64_t s : c.sizes()) XXH3_64bits_update(st.get(), &s, sizeof(s));
  if (c.numel() > 0) XXH3_64bits_update(st.get(), c.data_ptr(), c.nbytes());
  return XXH3_64bits_digest(st.get());
}

std::string hex(uint64_t h) {
  char b[17];
  std::snprintf(b, sizeof(b), "%016llx", static_cast<unsigned long long>(h));
  return b;
}

}  // namespace

uint64_t tensor_hash(const at::Tensor& t) { return hash_cpu(cpu_contiguous(t)); }

std::vector<uint64_t> param_hashes(const llm::flat_params& p) {
  at::Tensor buf = cpu_contiguous(p.buffer());
  std::vector<uint64_t> out;
  out.reserve(p.names().size());
  int64_t offset = 0;
  for (const auto& shape : p.shapes()) {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    out.push_back(hash_cpu(buf.narrow(0, offset, n).view(shape)));
    offset += n;
  }
  return out;
}

void verify_weights(const llm::flat_params& p, const std::vector<uint64_t>& expected) {
  const auto& names = p.names();
  if (expected.size() != names.size())
    throw weights_mismatch("verify_weights: " + std::to_string(expected.size()) +
                               " hashes published for a model of " + std::to_string(names.size()) +
                               " tensors",
                           {});
  auto got = param_hashes(p);
  std::vector<std::string> bad;
  std::string detail;
  for (size_t i = 0; i < names.size(); ++i) {
    if (got[i] == expected[i]) continue;
    if (bad.size() < 5)
      detail += (bad.empty() ? "" : ", ") + names[i] + " (got " + hex(got[i]) + ", expected " +
                hex(expected[i]) + ")";
    bad.push_back(names[i]);
  }
  if (bad.empty()) return;
  throw weights_mismatch("verify_weights: " + std::to_string(bad.size()) + " of " +
                             std::to_string(names.size()) + " tensors differ: " + detail +
                             (bad.size() > 5 ? ", ..." : ""),
                         bad);  // a copy: the message above reads bad.size()
}

}  // namespace milesrt::weights
