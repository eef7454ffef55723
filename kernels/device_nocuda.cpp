#include "kernels/device.hpp"

namespace milesrt::kernels {

bool cuda_compiled() { return false; }
int cuda_device_count() { return 0; }
std::string cuda_summary() { return "CUDA kernels not compiled (no CUDA toolkit at build time)"; }

}  // namespace milesrt::kernels
