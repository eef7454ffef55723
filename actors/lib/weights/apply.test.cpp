// The engine side of publishing (receiver::apply) on tiny CPU models: colocated share, copy and
// adopting a kept copy (handover = copy), disk_delta over several versions and a corrupt delta, ipc
// within one process, versions that go backwards, and verifyWeights catching tampered hashes.
#include "actors/lib/weights/apply.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "actors/lib/llm/tiny_model_testing.hpp"
#include "actors/lib/weights/disk_delta.hpp"
#include "actors/lib/weights/ipc.hpp"
#include "actors/lib/weights/local_versions.hpp"
#include "actors/lib/weights/tensor_hash.hpp"

namespace milesrt::weights {
namespace {
namespace fs = std::filesystem;

std::unique_ptr<llm::decoder> tiny(uint64_t seed) { return llm::testing::tiny_model(seed); }

/// A small optimizer-like change of every weight.
void nudge(llm::decoder& m, uint64_t seed) {
  at::NoGradGuard no_grad;
  at::manual_seed(seed);
  auto b = m.mutable_params().buffer().detach();
  b.add_(at::randn(b.sizes()) * 1e-3);
}

bool same_weights(const llm::decoder& a, const llm::decoder& b) {
  return param_hashes(a.params()) == param_hashes(b.params()) &&
         at::equal(a.params().buffer().detach(), b.params().buffer().detach());
}

struct temp_dir {
  fs::path path =
      fs::temp_directory_path() / ("milesrt_apply_" + std::to_string(::getpid()) + "_" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  temp_dir() { fs::remove_all(path); }
  ~temp_dir() { fs::remove_all(path); }
};

weights_update update(uint64_t version, const std::string& transport) {
  weights_update u;
  u.version = version;
  u.transport = transport;
  u.channel = "trainer";
  u.pid = ::getpid();
  return u;
}

/// The message of what `f` throws ("<no error>" when nothing).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "<no error>";
}

class Apply : public ::testing::Test {
 protected:
  Apply() { local_.add_trainer("trainer", trainer_->shared_params()); }
  std::unique_ptr<llm::decoder> trainer_ = tiny(1), engine_ = tiny(2);
  local_versions local_;
  receiver r_;
};

TEST_F(Apply, ColocatedShareUsesTheTrainersOwnBuffer) {
  ASSERT_FALSE(same_weights(*trainer_, *engine_));
  auto u = update(1, "colocated");
  u.share = true;
  r_.apply(*engine_, u, local_);
  EXPECT_EQ(engine_->shared_params(), trainer_->shared_params());
  EXPECT_EQ(engine_->params().buffer().data_ptr(), trainer_->params().buffer().data_ptr());
  EXPECT_EQ(r_.version(), 1u);
  nudge(*trainer_, 7);  // the engine sees the trainer's next step without any copy
  EXPECT_TRUE(same_weights(*trainer_, *engine_));
  u.version = 2;
  r_.apply(*engine_, u, local_);
  EXPECT_EQ(engine_->params().buffer().data_ptr(), trainer_->params().buffer().data_ptr());
  EXPECT_EQ(r_.version(), 2u);
}

TEST_F(Apply, ColocatedCopyFillsAnOwnBufferBitwise) {
  auto u = update(1, "colocated");
  u.share = true;
  r_.apply(*engine_, u, local_);  // shares first: the copy must then leave the trainer's buffer
  nudge(*trainer_, 3);
  u = update(2, "colocated");
  u.hashes = param_hashes(trainer_->params());
  r_.apply(*engine_, u, local_);
  EXPECT_NE(engine_->shared_params(), trainer_->shared_params());
  EXPECT_NE(engine_->params().buffer().data_ptr(), trainer_->params().buffer().data_ptr());
  EXPECT_TRUE(same_weights(*trainer_, *engine_));
  nudge(*trainer_, 4);  // the trainer's next step does not reach the engine's copy
  EXPECT_FALSE(same_weights(*trainer_, *engine_));
  u = update(3, "colocated");
  r_.apply(*engine_, u, local_);
  EXPECT_TRUE(same_weights(*trainer_, *engine_));
  EXPECT_EQ(r_.version(), 3u);
}

TEST_F(Apply, ColocatedCopyHandoverKeepsThePublishedVersionWhileTheTrainerTrains) {
  local_.keep_copies(2);  // what a publisher with handover = copy registers
  auto ref = local_.announce("trainer", 1);
  EXPECT_EQ(ref.channel, "trainer");
  const auto v1 = trainer_->params().buffer().detach().clone();
  nudge(*trainer_, 21);  // the trainer's next step starts before the engine applies version 1
  auto u = update(1, "colocated");
  u.hashes = param_hashes(*local_.frozen("trainer", 1));
  r_.apply(*engine_, u, local_);
  EXPECT_TRUE(at::equal(engine_->params().buffer().detach(), v1))
      << "the engine got a torn or newer version";
  EXPECT_NE(engine_->params().buffer().data_ptr(), trainer_->params().buffer().data_ptr());
  // The engine adopted the kept copy itself: no second copy.
  EXPECT_EQ(engine_->params().buffer().data_ptr(),
            local_.frozen("trainer", 1)->buffer().data_ptr());
  nudge(*trainer_, 22);
  EXPECT_TRUE(at::equal(engine_->params().buffer().detach(), v1));
  // Versions 2 and 3 are announced; 1 is no longer kept (keep 2), and an engine that still wants
  // it is told how to keep more.
  local_.announce("trainer", 2);
  local_.announce("trainer", 3);
  EXPECT_EQ(local_.frozen("trainer", 1), nullptr);
  EXPECT_EQ(local_.kept_range("trainer"), "2..3");
  receiver late;
  auto msg = error_of([&] { late.apply(*engine_, update(1, "colocated"), local_); });
  EXPECT_NE(msg.find("no longer has a copy of version 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("keepVersions"), std::string::npos) << msg;
  r_.apply(*engine_, update(3, "colocated"), local_);
  EXPECT_TRUE(at::equal(engine_->params().buffer().detach(), trainer_->params().buffer().detach()));
  EXPECT_EQ(engine_->params().buffer().data_ptr(),
            local_.frozen("trainer", 3)->buffer().data_ptr());
}

TEST_F(Apply, ColocatedShareHandsOverTheTrainersBufferEvenWhenCopiesAreKept) {
  local_.keep_copies(1);
  local_.announce("trainer", 1);
  auto u = update(1, "colocated");
  u.share = true;
  r_.apply(*engine_, u, local_);
  EXPECT_EQ(engine_->params().buffer().data_ptr(), trainer_->params().buffer().data_ptr());
}

TEST_F(Apply, ColocatedWithoutTheTrainerNamesTheChannel) {
  local_versions empty;
  auto msg = error_of([&] { r_.apply(*engine_, update(1, "colocated"), empty); });
  EXPECT_NE(msg.find("no trainer 'trainer'"), std::string::npos) << msg;
  EXPECT_EQ(r_.version(), 0u);
}

TEST_F(Apply, DiskDeltaOverThreeVersionsIsBitExact) {
  temp_dir d;
  delta_writer w(d.path, 0);
  for (uint64_t v = 1; v <= 3; ++v) {
    if (v > 1) nudge(*trainer_, v);
    w.publish(trainer_->params(), v);
    auto u = update(v, "disk_delta");
    u.location = d.path.string();
    u.hashes = param_hashes(trainer_->params());
    r_.apply(*engine_, u, local_);
    ASSERT_TRUE(same_weights(*trainer_, *engine_)) << "version " << v;
    EXPECT_EQ(r_.version(), v);
  }
  EXPECT_EQ(r_.full_copies(), 0u);
}

/// Flips one byte in the middle of the first tensor file of dir/v<version>.
void corrupt(const fs::path& dir, uint64_t version) {
  const fs::path v = dir / ("v" + std::to_string(version));
  std::ifstream in(v / "manifest.json");
  auto m = nlohmann::json::parse(in);
  const fs::path f = v / m["tensors"][0]["file"].get<std::string>();
  std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
  io.seekg(fs::file_size(f) / 2);
  char c;
  io.get(c);
  io.seekp(fs::file_size(f) / 2);
  io.put(static_cast<char>(c ^ 0x21));
}

TEST_F(Apply, CorruptDeltaWithoutAPublisherNamesTheVersion) {
  temp_dir d;
  delta_writer w(d.path, 0);
  w.publish(trainer_->params(), 1);
  auto u = update(1, "disk_delta");
  u.location = d.path.string();
  r_.apply(*engine_, u, local_);
  nudge(*trainer_, 9);
  w.publish(trainer_->params(), 2);
  corrupt(d.path, 2);
  auto before = engine_->params().buffer().detach().clone();
  u.version = 2;
  auto msg = error_of([&] { r_.apply(*engine_, u, local_); });
  EXPECT_NE(msg.find("version 2"), std::string::npos) << msg;
  EXPECT_EQ(r_.version(), 1u);
  EXPECT_EQ(r_.full_copies(), 0u);
  EXPECT_TRUE(at::equal(before, engine_->params().buffer().detach()));
}

TEST_F(Apply, IpcRoundTripInOneProcess) {
  const std::string name = "/milesrt_apply_test_" + std::to_string(::getpid());
  const auto& b = trainer_->params().buffer();
  shm_publisher pub(name, b.numel() * b.element_size());
  for (uint64_t v = 1; v <= 2; ++v) {
    if (v > 1) nudge(*trainer_, 11);
    pub.publish(trainer_->params(), v);
    auto u = update(v, "ipc");
    u.location = name;
    u.hashes = param_hashes(trainer_->params());
    r_.apply(*engine_, u, local_);
    EXPECT_TRUE(same_weights(*trainer_, *engine_)) << "version " << v;
    EXPECT_NE(engine_->params().buffer().data_ptr(), trainer_->params().buffer().data_ptr());
  }
  EXPECT_EQ(r_.version(), 2u);
}

TEST_F(Apply, AVersionGoingBackwardsIsRefused) {
  auto u = update(5, "colocated");
  r_.apply(*engine_, u, local_);
  auto before = engine_->params().buffer().detach().clone();
  nudge(*trainer_, 5);
  u.version = 4;
  auto msg = error_of([&] { r_.apply(*engine_, u, local_); });
  EXPECT_NE(msg.find("version 4 is older than the 5"), std::string::npos) << msg;
  EXPECT_EQ(r_.version(), 5u);
  EXPECT_TRUE(at::equal(before, engine_->params().buffer().detach()));
  u.version = 5;  // the same version again is accepted
  r_.apply(*engine_, u, local_);
  EXPECT_TRUE(same_weights(*trainer_, *engine_));
}

TEST_F(Apply, VerifyWeightsDetectsTamperedHashes) {
  auto u = update(1, "colocated");
  u.hashes = param_hashes(trainer_->params());
  u.hashes[3] ^= 1;
  try {
    r_.apply(*engine_, u, local_);
    ADD_FAILURE() << "no weights_mismatch";
  } catch (const weights_mismatch& e) {
    ASSERT_EQ(e.tensors.size(), 1u);
    EXPECT_EQ(e.tensors[0], trainer_->params().names()[3]);
    EXPECT_NE(std::string(e.what()).find(trainer_->params().names()[3]), std::string::npos)
        << e.what();
    const std::string count =
        "1 of " + std::to_string(trainer_->params().names().size()) + " tensors differ";
    EXPECT_NE(std::string(e.what()).find(count), std::string::npos) << e.what();
  }
  EXPECT_EQ(r_.version(), 0u);
  // disk_delta and ipc verify too.
  temp_dir d;
  delta_writer w(d.path, 0);
  w.publish(trainer_->params(), 2);
  auto dd = update(2, "disk_delta");
  dd.location = d.path.string();
  dd.hashes = param_hashes(trainer_->params());
  dd.hashes.back() ^= 1;
  EXPECT_THROW(r_.apply(*engine_, dd, local_), weights_mismatch);
  EXPECT_EQ(r_.version(), 0u);
  // A wrong number of hashes is an error too, not a silent pass.
  dd.hashes.pop_back();
  EXPECT_NE(error_of([&] { r_.apply(*engine_, dd, local_); }), "<no error>");
}

TEST_F(Apply, UnknownTransportIsNamed) {
  auto msg = error_of([&] { r_.apply(*engine_, update(1, "pigeon"), local_); });
  EXPECT_NE(msg.find("transport 'pigeon'"), std::string::npos) << msg;
}

}  // namespace
}  // namespace milesrt::weights
