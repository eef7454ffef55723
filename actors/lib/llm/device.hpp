#pragma once
/// Which libtorch this build links and which devices it can reach.

#include <string>

namespace milesrt::llm {

/// "libtorch 2.11.0 (CUDA 13.0 part linked, 0 CUDA devices)": printed by `milesrt --version`.
std::string torch_summary();

}  // namespace milesrt::llm
