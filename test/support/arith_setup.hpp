#pragma once
// The tiny arithmetic setup the end-to-end tests run on, made by milesrt_arith_make
// (MILESRT_ARITH_MAKE, which the test's CMake target defines): model/, sft.jsonl, rl.jsonl and
// heldout.jsonl in one folder.

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "test/support.hpp"

namespace milesrt::testing {

/// Makes the setup in `dir` (operands up to 9; `model_args` for the maker's model options, e.g.
/// "--hidden 256 --heads 2"); returns the maker's exit status as std::system gives it (0: made).
inline int make_arith_setup(const fs::path& dir, int sft_size = 64, int rl_size = 64,
                            int heldout = 8, const std::string& model_args = "") {
  const std::string cmd = std::string("'") + MILESRT_ARITH_MAKE + "' --out '" + dir.string() +
                          "' --sft-size " + std::to_string(sft_size) + " --rl-size " +
                          std::to_string(rl_size) + " --heldout " + std::to_string(heldout) +
                          " --max-operand 9 " + model_args + " > /dev/null";
  return std::system(cmd.c_str());
}

/// The default setup, made once per test binary in scratch(tag) (the first call's tag).
inline const fs::path& shared_arith_setup(const std::string& tag) {
  static fs::path dir = [&] {
    fs::path d = scratch(tag);
    EXPECT_EQ(make_arith_setup(d), 0);
    return d;
  }();
  return dir;
}

}  // namespace milesrt::testing
