// The global L2 norm summed alike from the whole buffer and from ZeRO-1 slices, on any thread
// count, and close to the exact value.
#include "actors/lib/rl/grad_norm.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "actors/lib/rl/master_weights.hpp"

namespace milesrt::rl {
namespace {

/// Values over many magnitudes (so that the order of additions shows in the last bits), of a
/// length that is not whole blocks.
at::Tensor gradient(int64_t n) {
  at::manual_seed(7);
  auto v = at::randn({n}, at::kFloat);
  return v * at::pow(10.0, at::randint(-4, 3, {n}, at::kFloat));
}

float value(const at::Tensor& t) { return t.item<float>(); }

TEST(GradNorm, SlicesOfAnyNumberOfRanksGiveTheWholeBuffersBits) {
  const int64_t n = 1000003;
  const auto g = gradient(n);
  const float whole = value(global_l2_norm(g));
  for (int world : {2, 3, 5}) {
    std::vector<at::Tensor> gathered;
    for (int r = 0; r < world; ++r) {
      const auto mine = shard_of(n, r, world);
      auto sums = at::zeros({mine.stride / kNormBlock}, at::kDouble);
      if (mine.length() > 0) {
        auto own = block_sums_of_squares(g.narrow(0, mine.begin, mine.length()));
        sums.narrow(0, 0, own.numel()).copy_(own);
      }
      gathered.push_back(sums);
    }
    EXPECT_EQ(value(norm_from_block_sums(at::cat(gathered), norm_blocks(n))), whole)
        << world << " ranks";
  }
}

TEST(GradNorm, TheSameBitsOnAnyThreadCountAndNearTheExactValue) {
  const auto g = gradient(3 * (int64_t{1} << 20) + 17);
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const float one = value(global_l2_norm(g));
  at::set_num_threads(4);
  const float four = value(global_l2_norm(g));
  at::set_num_threads(threads);
  EXPECT_EQ(one, four);
  const double exact = std::sqrt(g.to(at::kDouble).square().sum().item<double>());
  EXPECT_NEAR(one, exact, exact * 1e-7);
  // A bf16 gradient is read in its own dtype: the norm of its values.
  const auto b = g.to(at::kBFloat16);
  EXPECT_EQ(value(global_l2_norm(b)), value(global_l2_norm(b.to(at::kFloat))));
}

TEST(GradNorm, EmptyAndNonFiniteBuffers) {
  EXPECT_EQ(value(global_l2_norm(at::zeros({0}, at::kFloat))), 0.0f);
  auto g = gradient(100);
  g.narrow(0, 5, 1).fill_(std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isinf(value(global_l2_norm(g))));
  g.narrow(0, 7, 1).fill_(std::nanf(""));
  EXPECT_TRUE(std::isnan(value(global_l2_norm(g))));
}

}  // namespace
}  // namespace milesrt::rl
