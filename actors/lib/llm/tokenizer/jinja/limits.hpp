#pragma once
/// Bounds of one render (docs/limits.md, "Chat templates"), as transformers' sandboxed Jinja has
/// (its range() refuses more than 100,000 items; Python's recursion limit stops a macro that calls
/// itself): a template cannot exhaust the stack, the memory or the time of the process.

#include <cstddef>
#include <cstdint>
#include <string>

#include "actors/lib/llm/tokenizer/jinja/value.hpp"

namespace milesrt::llm::jinja::limits {

constexpr int max_call_depth = 100;              ///< macros and caller() within one another
constexpr int64_t max_range = 100000;            ///< items of one range()
constexpr int64_t max_iterations = 10'000'000;   ///< for-loop iterations of one render
constexpr size_t max_output = size_t{64} << 20;  ///< bytes a render writes; items of a `*`

/// Counts one macro or caller() call for as long as it runs; refuses the one nested past
/// max_call_depth (a macro that calls itself without end).
class call_depth {
 public:
  call_depth(int& depth, const std::string& what) : depth_(depth) {
    if (depth_ >= max_call_depth) {
      throw error(what + ": calls nested deeper than " + std::to_string(max_call_depth) +
                  " (recursion without end?)");
    }
    ++depth_;
  }
  ~call_depth() { --depth_; }
  call_depth(const call_depth&) = delete;
  call_depth& operator=(const call_depth&) = delete;

 private:
  int& depth_;
};

/// One more for-loop iteration (`iterations` counts them) of a render that has written
/// `written` bytes: refuses the one past max_iterations, and a text grown past max_output.
inline void count_iteration(int64_t& iterations, size_t written) {
  if (++iterations > max_iterations) {
    throw error("more than " + std::to_string(max_iterations) +
                " loop iterations in one render (the limit)");
  }
  if (written > max_output) {
    throw error("the rendered text exceeds " + std::to_string(max_output >> 20) +
                " MiB (the limit)");
  }
}

}  // namespace milesrt::llm::jinja::limits
