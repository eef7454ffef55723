// Builds without CUDA: the paged attention kernels are absent.
#include "kernels/attention/paged_attention.hpp"

namespace milesrt::kernels {
namespace {
[[noreturn]] void absent() { throw attention_error("paged attention: built without CUDA kernels"); }
}  // namespace

bool paged_attention_supported(int) { return false; }
paged_attention::paged_attention(void* f, void* i, void* p)
    : float_ws_(f), int_ws_(i), pinned_ws_(p) {}
void paged_attention::plan_decode(const int32_t*, int, int, int, int, int, bool, void*) {
  absent();
}
void paged_attention::run_decode(const void*, void*, const paged_kv_desc&, int, int, float,
                                 void*) const {
  absent();
}
void paged_attention::plan_prefill(const int32_t*, const int32_t*, int, int, int, int, int, void*) {
  absent();
}
void paged_attention::run_prefill(const void*, const int32_t*, void*, const paged_kv_desc&, int,
                                  int, float, void*) const {
  absent();
}

}  // namespace milesrt::kernels
