// local_versions on tiny CPU weights: announcing without copies, freezing with copies (values
// kept while the trainer's buffer changes), retention, several publishers' asks, and the errors.
#include "actors/lib/weights/local_versions.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "runtime/core/process_store.hpp"

namespace milesrt::weights {
namespace {

std::shared_ptr<llm::flat_params> params() {
  auto p = std::make_shared<llm::flat_params>(
      std::vector<std::pair<std::string, std::vector<int64_t>>>{{"a", {3, 5}}, {"b", {7}}},
      at::kFloat, at::Device(at::kCPU));
  at::NoGradGuard no_grad;
  p->buffer().detach().copy_(at::randn(p->buffer().sizes()));
  return p;
}

void step(llm::flat_params& p) {
  at::NoGradGuard no_grad;
  p.buffer().detach().add_(1.0);
}

TEST(LocalVersions, IsOneObjectPerProcessStore) {
  runtime::process_store store;
  auto a = store.get_or_make<local_versions>();
  auto b = store.get_or_make<local_versions>();
  EXPECT_EQ(a, b);
  runtime::process_store other;
  EXPECT_NE(other.get_or_make<local_versions>(), a);
}

TEST(LocalVersions, WithoutAPublisherAskingNothingIsCopied) {
  local_versions v;
  auto live = params();
  v.add_trainer("t", live);
  auto ref = v.announce("t", 1);
  EXPECT_EQ(ref.version, 1u);
  EXPECT_EQ(ref.channel, "t");
  EXPECT_EQ(ref.pid, ::getpid());
  EXPECT_EQ(v.live("t"), live);
  EXPECT_EQ(v.frozen("t", 1), nullptr);
  EXPECT_EQ(v.latest("t"), 1u);
  EXPECT_EQ(v.copies_kept(), 0u);
  EXPECT_EQ(v.kept_range("t"), "none");
}

TEST(LocalVersions, ACopyKeepsItsVersionWhileTheTrainerTrains) {
  local_versions v;
  auto live = params();
  v.add_trainer("t", live);
  v.keep_copies(3);
  v.announce("t", 1);
  const auto v1 = live->buffer().detach().clone();
  auto copy = v.frozen("t", 1);
  ASSERT_NE(copy, nullptr);
  EXPECT_NE(copy->buffer().data_ptr(), live->buffer().data_ptr());
  EXPECT_EQ(copy->names(), live->names());
  step(*live);
  EXPECT_TRUE(at::equal(copy->buffer().detach(), v1));
  EXPECT_FALSE(at::equal(live->buffer().detach(), v1));
  EXPECT_EQ(copy->buffer().scalar_type(), live->buffer().scalar_type());
}

TEST(LocalVersions, KeepsTheNewestCopiesTheMostAnyPublisherAskedFor) {
  local_versions v;
  v.add_trainer("t", params());
  v.keep_copies(2);
  v.keep_copies(1);  // a second publisher asking for fewer does not shrink the first one's
  EXPECT_EQ(v.copies_kept(), 2u);
  for (uint64_t i = 1; i <= 4; ++i) v.announce("t", i);
  EXPECT_EQ(v.frozen("t", 2), nullptr);
  EXPECT_NE(v.frozen("t", 3), nullptr);
  EXPECT_NE(v.frozen("t", 4), nullptr);
  EXPECT_EQ(v.kept_range("t"), "3..4");
  // A copy an engine adopted lives on after it is dropped here.
  auto held = v.frozen("t", 3);
  v.announce("t", 5);
  EXPECT_EQ(v.frozen("t", 3), nullptr);
  EXPECT_TRUE(held->buffer().defined());
}

TEST(LocalVersions, AnUnknownTrainerIsNamed) {
  local_versions v;
  EXPECT_EQ(v.live("nobody"), nullptr);
  EXPECT_EQ(v.frozen("nobody", 1), nullptr);
  EXPECT_EQ(v.latest("nobody"), 0u);
  try {
    v.announce("nobody", 3);
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("trainer 'nobody'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace milesrt::weights
