#pragma once
/// For tests of corrupt files: a same-size corruption, which a size check cannot see.

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>

namespace milesrt::testing {

/// Overwrites `n` bytes of `path` from `at` with their complement: its size stays the same.
inline void flip_bytes(const std::filesystem::path& path, size_t at, size_t n) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  std::string bytes(n, '\0');
  f.seekg(std::streamoff(at));
  f.read(bytes.data(), std::streamsize(n));
  for (auto& c : bytes) c = char(~c);
  f.seekp(std::streamoff(at));
  f.write(bytes.data(), std::streamsize(n));
}

}  // namespace milesrt::testing
