// The fp32 host reference of the paged attention kernels (see paged_attention.hpp).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/attention/paged_attention.hpp"

namespace milesrt::kernels {

void paged_attention_reference(const float* q, float* o, const float* k, const float* v,
                               const int32_t* qo_indptr, const int32_t* kv_indptr,
                               const int32_t* kv_indices, const int32_t* kv_last_page_len,
                               int batch, int qo_heads, int kv_heads, int head_dim, int page_size,
                               float sm_scale) {
  const int group = qo_heads / kv_heads;
  for (int b = 0; b < batch; ++b) {
    const int pages = kv_indptr[b + 1] - kv_indptr[b];
    const int kv_len = pages == 0 ? 0 : (pages - 1) * page_size + kv_last_page_len[b];
    const int q_len = qo_indptr[b + 1] - qo_indptr[b];
    // The cache rows of this sequence's tokens, in order.
    std::vector<int64_t> rows(kv_len);
    for (int p = 0; p < kv_len; ++p)
      rows[p] = int64_t(kv_indices[kv_indptr[b] + p / page_size]) * page_size + p % page_size;
    for (int i = 0; i < q_len; ++i) {
      const int limit = kv_len - q_len + i;  // the last key this query sees (bottom-right causal)
      for (int h = 0; h < qo_heads; ++h) {
        const int g = h / group;
        const float* qv = q + (int64_t(qo_indptr[b] + i) * qo_heads + h) * head_dim;
        std::vector<double> score(limit + 1);
        double m = -INFINITY;
        for (int p = 0; p <= limit; ++p) {
          const float* kv = k + (rows[p] * kv_heads + g) * head_dim;
          double dot = 0;
          for (int d = 0; d < head_dim; ++d) dot += double(qv[d]) * kv[d];
          score[p] = dot * sm_scale;
          m = std::max(m, score[p]);
        }
        double sum = 0;
        for (auto& s : score) sum += (s = std::exp(s - m));
        float* out = o + (int64_t(qo_indptr[b] + i) * qo_heads + h) * head_dim;
        for (int d = 0; d < head_dim; ++d) {
          double acc = 0;
          for (int p = 0; p <= limit; ++p)
            acc += score[p] * v[(rows[p] * kv_heads + g) * head_dim + d];
          out[d] = float(acc / sum);
        }
      }
    }
  }
}

}  // namespace milesrt::kernels
