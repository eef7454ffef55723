#include "actors/trainer/data_parallel.hpp"

#include <ATen/ATen.h>

#include <algorithm>

#include "actors/lib/dist/collectives.hpp"
#include "actors/lib/rl/grad_norm.hpp"

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

namespace {

/// Whether every rank's losses were finite.
bool all_ranks_finite(dist::collectives& group, bool finite) {
  auto flag =
      at::full({1}, finite ? 0.0f : 1.0f, at::TensorOptions(at::kFloat).device(group.device()));
  group.all_reduce(flag);
  return flag.item<float>() == 0.0f;
}

}  // namespace

bool sum_gradients(dist::collectives& group, const at::Tensor& grad, bool finite,
                   int64_t bucket_bytes) {
  if (!all_ranks_finite(group, finite)) return false;
  auto flat = grad.detach().view(-1);
  const int64_t per_bucket = std::max<int64_t>(1, bucket_bytes / flat.element_size());
  for (int64_t begin = 0; begin < flat.numel(); begin += per_bucket) {
    auto bucket = flat.slice(0, begin, std::min(flat.numel(), begin + per_bucket));
    group.all_reduce(bucket);
  }
  return true;
}

bool scatter_gradients(dist::collectives& group, const at::Tensor& grad, bool finite,
                       const rl::shard_range& mine, at::Tensor& out) {
  if (!all_ranks_finite(group, finite)) return false;
  auto flat = grad.detach().view(-1);
  const int64_t padded = mine.stride * group.world_size();
  auto in = at::zeros({padded}, flat.options());
  in.narrow(0, 0, flat.numel()).copy_(flat);
  auto slot = at::empty({mine.stride}, flat.options());
  group.reduce_scatter(slot, in);
  out = slot.narrow(0, 0, mine.length());
  return true;
}

at::Tensor global_norm(dist::collectives& group, const at::Tensor& slice,
                       const rl::shard_range& mine, int64_t numel) {
  // Slices start at multiples of kNormBlock values, so a rank's blocks are the whole buffer's.
  TORCH_CHECK(mine.stride % rl::kNormBlock == 0, "global_norm: a slot of ", mine.stride,
              " values is not whole blocks of ", rl::kNormBlock);
  const int64_t per_rank = mine.stride / rl::kNormBlock;
  auto sums = at::zeros({per_rank}, slice.options().dtype(at::kDouble));
  if (slice.numel() > 0) {
    auto own = rl::block_sums_of_squares(slice);
    sums.narrow(0, 0, own.numel()).copy_(own);
  }
  auto all = at::empty({per_rank * group.world_size()}, sums.options());
  group.all_gather(all, sums);
  return rl::norm_from_block_sums(all, rl::norm_blocks(numel));
}

void gather_weights(dist::collectives& group, const at::Tensor& master, const rl::shard_range& mine,
                    const at::Tensor& weights) {
  auto flat = weights.detach().view(-1);
  auto slot = at::zeros({mine.stride}, flat.options());
  slot.narrow(0, 0, mine.length()).copy_(master);
  auto all = at::empty({mine.stride * group.world_size()}, flat.options());
  group.all_gather(all, slot);
  flat.copy_(all.narrow(0, 0, flat.numel()));
}

}  // namespace milesrt::trainer
