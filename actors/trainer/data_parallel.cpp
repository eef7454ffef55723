#include "actors/trainer/data_parallel.hpp"

#include <ATen/ATen.h>

#include <algorithm>

#include "actors/lib/dist/collectives.hpp"

namespace milesrt::trainer {

std::vector<size_t> rank_micro_batches(const batch_layout& layout,
                                       const std::vector<train_sequence>& batch, int rank,
                                       int world) {
  std::vector<int64_t> tokens;  // per micro-batch
  int64_t total = 0;
  for (const auto& mb : layout.micro_batches) {
    int64_t n = 0;
    for (size_t i : mb) n += static_cast<int64_t>(batch[i].prompt.size() + batch[i].output.size());
    tokens.push_back(n);
    total += n;
  }
  // Micro-batch i goes to the rank whose share [r/world, (r+1)/world) of the tokens holds the
  // middle of i's tokens.
  std::vector<size_t> mine;
  int64_t before = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int64_t middle2 = 2 * before + tokens[i];  // twice the middle, to stay in integers
    const int64_t owner =
        std::min<int64_t>(world - 1, middle2 * world / std::max<int64_t>(1, 2 * total));
    if (owner == rank) mine.push_back(i);
    before += tokens[i];
  }
  return mine;
}

bool sum_gradients(dist::collectives& group, const at::Tensor& grad, bool finite,
                   int64_t bucket_bytes) {
  auto flag = at::full({1}, finite ? 0.0f : 1.0f, at::kFloat);
  group.all_reduce(flag);
  if (flag.item<float>() != 0.0f) return false;
  auto flat = grad.detach().view(-1);
  const int64_t per_bucket = std::max<int64_t>(1, bucket_bytes / flat.element_size());
  for (int64_t begin = 0; begin < flat.numel(); begin += per_bucket) {
    auto bucket = flat.slice(0, begin, std::min(flat.numel(), begin + per_bucket));
    group.all_reduce(bucket);
  }
  return true;
}

}  // namespace milesrt::trainer
