// FlashInfer's paged prefill kernel for CTA_TILE_Q = 16 (see flashinfer_types.cuh).
#include <flashinfer/attention/prefill.cuh>

#include "kernels/attention/flashinfer_types.cuh"

MILESRT_FI_PREFILL_INSTANCE(16)
