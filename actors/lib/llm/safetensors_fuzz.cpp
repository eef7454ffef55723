// libFuzzer target for the safetensors header parser:
//   clang++ -std=c++17 -g -O1 -fsanitize=fuzzer,address -I. actors/lib/llm/safetensors_fuzz.cpp \
//     actors/lib/llm/safetensors.cpp -o safetensors_fuzz && ./safetensors_fuzz
// (built by CMake with -DMILESRT_FUZZ=ON when the compiler is clang).
#include <cstddef>
#include <cstdint>

#include "actors/lib/llm/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto h = milesrt::llm::parse_safetensors_header(data, size, size, "fuzz");
    for (auto& [name, t] : h.tensors) {
      if (t.end > size - 8 - h.header_size) __builtin_trap();  // accepted offsets must be in range
    }
  } catch (const milesrt::llm::safetensors_error&) {
  }
  return 0;
}
