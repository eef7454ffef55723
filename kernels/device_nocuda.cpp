#include "kernels/device.hpp"

namespace milesrt::kernels {

bool cuda_compiled() { return false; }
int cuda_device_count() { return 0; }
bool cuda_memory_info(int, size_t&, size_t&) { return false; }
std::string cuda_summary() { return "CUDA kernels not compiled (no CUDA toolkit at build time)"; }

}  // namespace milesrt::kernels
