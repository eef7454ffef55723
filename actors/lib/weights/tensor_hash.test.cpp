#include "actors/lib/weights/tensor_hash.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace milesrt::weights {
namespace {

llm::flat_params small_params() {
  llm::flat_params p({{"embed", {7, 5}}, {"layers.0.w", {3, 4, 2}}, {"norm", {5}}}, at::kFloat,
                     at::kCPU);
  at::manual_seed(1);
  p.buffer().detach().copy_(at::randn({p.buffer().numel()}));
  return p;
}

TEST(TensorHash, DtypeAndShapeAreMixedIn) {
  at::Tensor a = at::randn({4, 6});
  EXPECT_EQ(tensor_hash(a), tensor_hash(a.clone()));
  EXPECT_NE(tensor_hash(a), tensor_hash(a.view({6, 4})));
  EXPECT_NE(tensor_hash(a), tensor_hash(a.view(at::kInt)));
  EXPECT_EQ(tensor_hash(a.t()), tensor_hash(a.t().contiguous()));  // non-contiguous input
  at::Tensor b = a.clone();
  b[2][3] = b[2][3].item<float>() + 1.0f;
  EXPECT_NE(tensor_hash(a), tensor_hash(b));
}

TEST(TensorHash, ParamHashesMatchPerTensorHashes) {
  auto p = small_params();
  auto h = param_hashes(p);
  ASSERT_EQ(h.size(), 3u);
  for (size_t i = 0; i < h.size(); ++i) EXPECT_EQ(h[i], tensor_hash(p.get(p.names()[i])));
  EXPECT_NO_THROW(verify_weights(p, h));
}

TEST(TensorHash, VerifyWeightsNamesDifferingTensors) {
  auto p = small_params();
  auto h = param_hashes(p);
  p.get("layers.0.w").detach()[1][2][0] = 42.0f;
  try {
    verify_weights(p, h);
    FAIL() << "no weights_mismatch";
  } catch (const weights_mismatch& e) {
    EXPECT_EQ(e.tensors, std::vector<std::string>{"layers.0.w"});
    EXPECT_NE(std::string(e.what()).find("layers.0.w"), std::string::npos) << e.what();
  }
  EXPECT_THROW(verify_weights(p, {1, 2}), weights_mismatch);
}

}  // namespace
}  // namespace milesrt::weights
