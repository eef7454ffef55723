#include "actors/lib/rl/grad_norm.hpp"

#include <ATen/ATen.h>

#include <algorithm>

namespace milesrt::rl {

namespace {

/// Rows of kNormBlock values summed by a pairwise tree: 32 pairs, then 16, ... (each level one
/// element-wise addition, so the rounding is the same on any device and thread count).
at::Tensor sum_rows_pairwise(at::Tensor rows) {
  for (int64_t w = kNormBlock / 2; w >= 1; w /= 2)
    rows = rows.narrow(1, 0, w) + rows.narrow(1, w, w);
  return rows.reshape({-1});
}

/// Values summed by a pairwise tree whose shape depends only on their count (an odd level gets a
/// zero appended; adding zero is exact).
at::Tensor sum_pairwise(at::Tensor v) {
  while (v.numel() > 1) {
    if (v.numel() % 2 == 1) v = at::cat({v, at::zeros({1}, v.options())});
    auto pairs = v.view({-1, 2});
    v = pairs.select(1, 0) + pairs.select(1, 1);
  }
  return v.numel() == 1 ? v.reshape({}) : at::zeros({}, v.options());
}

}  // namespace

at::Tensor block_sums_of_squares(const at::Tensor& values) {
  auto flat = values.detach().reshape({-1});
  const int64_t n = flat.numel();
  const int64_t blocks = norm_blocks(n);
  auto out = at::empty({blocks}, flat.options().dtype(at::kDouble));
  // In pieces, so that the fp64 copy stays small next to a large gradient.
  constexpr int64_t kPiece = int64_t{1} << 24;  // a multiple of kNormBlock
  for (int64_t at_value = 0; at_value < n; at_value += kPiece) {
    const int64_t len = std::min(kPiece, n - at_value);
    auto piece = flat.narrow(0, at_value, len).to(at::kDouble);
    const int64_t rows = norm_blocks(len);
    if (rows * kNormBlock != len) {
      piece = at::cat({piece, at::zeros({rows * kNormBlock - len}, piece.options())});
    }
    piece = piece * piece;
    out.narrow(0, at_value / kNormBlock, rows)
        .copy_(sum_rows_pairwise(piece.view({rows, kNormBlock})));
  }
  return out;
}

at::Tensor norm_from_block_sums(const at::Tensor& sums, int64_t blocks) {
  TORCH_CHECK(sums.scalar_type() == at::kDouble && sums.dim() == 1 && sums.numel() >= blocks,
              "norm_from_block_sums: expected at least ", blocks, " fp64 block sums, got ",
              sums.scalar_type(), " ", sums.sizes());
  return sum_pairwise(sums.narrow(0, 0, blocks).contiguous()).sqrt().to(at::kFloat);
}

at::Tensor global_l2_norm(const at::Tensor& values) {
  return norm_from_block_sums(block_sums_of_squares(values), norm_blocks(values.numel()));
}

}  // namespace milesrt::rl
