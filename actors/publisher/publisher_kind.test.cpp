// The publisher kind as a real actor: what it announces for each transport (colocated with
// handover = share, the trainer's buffer itself; with handover = copy, a kept copy with hashes;
// disk_delta, ipc), the errors it names, and the full copy an engine asks for when a delta is
// corrupt. The test plays the trainer: it announces each version to local_versions first.
#include "actors/publisher/publisher_kind.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "actors/lib/llm/tiny_model_testing.hpp"
#include "actors/lib/weights/apply.hpp"
#include "actors/lib/weights/local_versions.hpp"
#include "actors/lib/weights/messages.hpp"
#include "actors/lib/weights/tensor_hash.hpp"
#include "milesrt/publisher.capnp.h"
#include "runtime/testing/kind_testing.hpp"

namespace milesrt::publisher {
using namespace milesrt::weights;
namespace {
using namespace milesrt::runtime;
using namespace milesrt::kind_testing;
namespace fs = std::filesystem;
using Transport = schema::PublisherParams::Transport;
using Handover = schema::PublisherParams::Handover;

void nudge(llm::decoder& m, uint64_t seed) {
  at::NoGradGuard no_grad;
  at::manual_seed(seed);
  auto b = m.mutable_params().buffer().detach();
  b.add_(at::randn(b.sizes()) * 1e-3);
}

bool same_weights(const llm::decoder& a, const llm::decoder& b) {
  return at::equal(a.params().buffer().detach(), b.params().buffer().detach());
}

class PublisherKind : public ::testing::Test {
 protected:
  PublisherKind() {
    register_publisher_kind(kinds_);
    system_ = std::make_unique<test_system>(kinds_);
    fs::remove_all(dir_);
  }
  ~PublisherKind() override { fs::remove_all(dir_); }
  caf::actor_system& sys() { return system_->sys(); }

  caf::actor spawn(Transport t, Handover h, bool verify = true, uint32_t keep = 4) {
    params_of<schema::PublisherParams> p;
    p->setTransport(t);
    p->setHandover(h);
    p->setVerify(verify);
    p->setKeepVersions(keep);
    auto s = p.setup();
    s.name = "pub";
    s.run_dir = dir_;
    s.store = store_;
    return kinds_.find("publisher")->spawn(sys(), s);
  }

  /// Announces `version` of the trainer's weights (as the trainer does when it answers its step)
  /// and returns the one weights_update published.
  weights_update publish(const caf::actor& a, uint64_t version) {
    weights_ref ref = versions_->announce("trainer", version);
    auto reply = ask<node_reply>(sys(), a, process_atom::value, std::string("weights"), wrap(ref));
    if (!reply) {
      ADD_FAILURE() << sys().render(reply.error());
      return {};
    }
    EXPECT_EQ(reply->outputs.size(), 1u);
    if (reply->outputs.size() != 1) return {};
    const auto& out = reply->outputs[0];
    EXPECT_EQ(out.port, "updates");
    EXPECT_EQ(out.item.min_version, version);
    EXPECT_EQ(out.item.max_version, version);
    EXPECT_TRUE(reply->metrics.count("publish_seconds"));
    EXPECT_EQ(reply->metrics.at("publish_bytes"),
              static_cast<double>(trainer_->params().buffer().nbytes()));
    EXPECT_TRUE(out.item.payload.match_elements<weights_update>());
    if (!out.item.payload.match_elements<weights_update>()) return {};
    return out.item.payload.get_as<weights_update>(0);
  }

  kind_registry kinds_;
  std::unique_ptr<test_system> system_;
  fs::path dir_ =
      fs::temp_directory_path() / ("milesrt_publisher_kind_" + std::to_string(::getpid()) + "_" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::unique_ptr<llm::decoder> trainer_ = llm::testing::tiny_model(1);
  std::unique_ptr<llm::decoder> engine_ = llm::testing::tiny_model(2);
  std::shared_ptr<process_store> store_ = std::make_shared<process_store>();
  std::shared_ptr<local_versions> versions_ = [this] {
    auto v = store_->get_or_make<local_versions>();
    v->add_trainer("trainer", trainer_->shared_params());
    return v;
  }();
};

TEST_F(PublisherKind, ColocatedShareHandsOverTheTrainersBufferWithoutHashes) {
  auto a = spawn(Transport::COLOCATED, Handover::SHARE);
  auto u = publish(a, 3);
  EXPECT_EQ(u.version, 3u);
  EXPECT_EQ(u.transport, "colocated");
  EXPECT_EQ(u.channel, "trainer");
  EXPECT_TRUE(u.share);
  EXPECT_TRUE(u.hashes.empty());  // nothing is copied, so nothing to verify
  EXPECT_EQ(u.pid, ::getpid());
  EXPECT_EQ(u.publisher, caf::actor_cast<caf::actor>(a));
  receiver r;
  r.apply(*engine_, u, *versions_);
  EXPECT_EQ(engine_->params().buffer().data_ptr(), trainer_->params().buffer().data_ptr());
}

TEST_F(PublisherKind, ColocatedCopyPublishesAKeptCopyWithHashes) {
  auto a = spawn(Transport::COLOCATED, Handover::COPY);
  auto u = publish(a, 1);
  EXPECT_EQ(u.transport, "colocated");
  EXPECT_FALSE(u.share);
  EXPECT_EQ(u.hashes, param_hashes(trainer_->params()));
  receiver r;
  r.apply(*engine_, u, *versions_);
  EXPECT_NE(engine_->params().buffer().data_ptr(), trainer_->params().buffer().data_ptr());
  EXPECT_TRUE(same_weights(*trainer_, *engine_));
  // verify off: no hashes.
  auto b = spawn(Transport::COLOCATED, Handover::COPY, false);
  EXPECT_TRUE(publish(b, 2).hashes.empty());
}

// handover = copy when training overlaps publishing (the async schedule): the trainer's next step
// starts right after it announced version 1, before the publisher and the engine see it; what
// they publish and apply is still version 1, whole.
TEST_F(PublisherKind, CopyKeepsAPublishedVersionIntactWhileTheTrainerTrains) {
  auto a = spawn(Transport::COLOCATED, Handover::COPY, true, 2);
  weights_ref ref = versions_->announce("trainer", 1);
  const auto v1 = trainer_->params().buffer().detach().clone();
  nudge(*trainer_, 31);  // step 2 runs
  auto reply = ask<node_reply>(sys(), a, process_atom::value, std::string("weights"), wrap(ref));
  ASSERT_TRUE(reply) << sys().render(reply.error());
  auto u = reply->outputs.at(0).item.payload.get_as<weights_update>(0);
  receiver r;
  r.apply(*engine_, u, *versions_);  // verifies the hashes of version 1 too
  EXPECT_TRUE(at::equal(engine_->params().buffer().detach(), v1));
  nudge(*trainer_, 32);
  EXPECT_TRUE(at::equal(engine_->params().buffer().detach(), v1))
      << "training reached the published version";
  // A version the trainer did not announce (so no copy was taken) is refused, not read live.
  weights_ref unannounced = ref;
  unannounced.version = 7;
  auto refused =
      ask<node_reply>(sys(), a, process_atom::value, std::string("weights"), wrap(unannounced));
  ASSERT_FALSE(refused);
  EXPECT_NE(sys().render(refused.error()).find("has no copy of version 7"), std::string::npos)
      << sys().render(refused.error());
}

TEST_F(PublisherKind, ShareHandsOverTheSameBufferAndCopyNeverDoes) {
  auto shared = spawn(Transport::COLOCATED, Handover::SHARE);
  receiver r;
  r.apply(*engine_, publish(shared, 1), *versions_);
  EXPECT_EQ(engine_->params().buffer().data_ptr(), trainer_->params().buffer().data_ptr());
  EXPECT_EQ(engine_->shared_params(), trainer_->shared_params());
  auto copied = spawn(Transport::COLOCATED, Handover::COPY);
  r.apply(*engine_, publish(copied, 2), *versions_);
  EXPECT_NE(engine_->params().buffer().data_ptr(), trainer_->params().buffer().data_ptr());
  EXPECT_EQ(engine_->params().buffer().data_ptr(),
            versions_->frozen("trainer", 2)->buffer().data_ptr());
}

TEST_F(PublisherKind, IpcPublishesIntoASegmentTheReceiverReads) {
  auto a = spawn(Transport::IPC, Handover::SHARE);
  receiver r;
  for (uint64_t v = 1; v <= 2; ++v) {
    if (v > 1) nudge(*trainer_, 5);
    auto u = publish(a, v);
    EXPECT_EQ(u.transport, "ipc");
    EXPECT_EQ(u.location, "/milesrt-" + std::to_string(::getpid()) + "-pub");
    EXPECT_EQ(u.hashes, param_hashes(trainer_->params()));
    r.apply(*engine_, u, *versions_);
    EXPECT_TRUE(same_weights(*trainer_, *engine_)) << "version " << v;
  }
}

TEST_F(PublisherKind, DiskDeltaVersionsApplyBitExact) {
  auto a = spawn(Transport::DISK_DELTA, Handover::SHARE);
  receiver r;
  for (uint64_t v = 1; v <= 3; ++v) {
    if (v > 1) nudge(*trainer_, v);
    auto u = publish(a, v);
    EXPECT_EQ(u.transport, "disk_delta");
    EXPECT_EQ(fs::path(u.location), dir_ / "weights");  // the run dir's default
    EXPECT_TRUE(fs::exists(dir_ / "weights" / ("v" + std::to_string(v))));
    r.apply(*engine_, u, *versions_);
    EXPECT_TRUE(same_weights(*trainer_, *engine_)) << "version " << v;
  }
  EXPECT_EQ(r.full_copies(), 0u);
}

TEST_F(PublisherKind, CorruptDeltaIsReplacedByAFullCopyFromThePublisher) {
  auto a = spawn(Transport::DISK_DELTA, Handover::SHARE);
  receiver r;
  r.apply(*engine_, publish(a, 1), *versions_);
  nudge(*trainer_, 8);
  auto u = publish(a, 2);
  const fs::path v2 = dir_ / "weights" / "v2";
  {
    std::ifstream in(v2 / "manifest.json");
    auto m = nlohmann::json::parse(in);
    ASSERT_FALSE(m["base"].is_null()) << "version 2 should be a delta";
    const fs::path f = v2 / m["tensors"][0]["file"].get<std::string>();
    std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
    io.seekg(fs::file_size(f) / 2);
    char c;
    io.get(c);
    io.seekp(fs::file_size(f) / 2);
    io.put(static_cast<char>(c ^ 0x21));
  }
  r.apply(*engine_, u, *versions_);
  EXPECT_EQ(r.full_copies(), 1u);
  EXPECT_EQ(r.version(), 2u);
  EXPECT_TRUE(fs::exists(dir_ / "weights" / "v2-full"));
  EXPECT_TRUE(same_weights(*trainer_, *engine_));
  // Deltas go on from there.
  nudge(*trainer_, 9);
  r.apply(*engine_, publish(a, 3), *versions_);
  EXPECT_EQ(r.full_copies(), 1u);
  EXPECT_TRUE(same_weights(*trainer_, *engine_));
}

// The trainer may have stepped on between publishing version 2 and the engine's request for its
// full copy (async schedule): the full copy must still hold version 2's weights.
// The publisher keeps CPU copies of the versions it published, so a full copy asked for after
// the trainer moved on holds the requested version.
TEST_F(PublisherKind, FullCopyHoldsTheRequestedVersionAfterTheTrainerMovedOn) {
  auto a = spawn(Transport::DISK_DELTA, Handover::SHARE);
  receiver r;
  r.apply(*engine_, publish(a, 1), *versions_);
  nudge(*trainer_, 8);
  auto u = publish(a, 2);
  auto v2 = trainer_->params().buffer().detach().clone();
  const fs::path dir = dir_ / "weights" / "v2";
  {
    std::ifstream in(dir / "manifest.json");
    auto m = nlohmann::json::parse(in);
    const fs::path f = dir / m["tensors"][0]["file"].get<std::string>();
    fs::resize_file(f, fs::file_size(f) - 1);
  }
  nudge(*trainer_, 10);  // the trainer's next step, not yet published
  std::string error;
  try {
    r.apply(*engine_, u, *versions_);
  } catch (const std::exception& e) {
    error = e.what();
  }
  EXPECT_EQ(error, "");
  EXPECT_TRUE(at::equal(engine_->params().buffer().detach(), v2))
      << "the full copy is not version 2";
}

TEST_F(PublisherKind, FullCopyRequestBeforeAnyDiskPublishIsAnError) {
  auto a = spawn(Transport::DISK_DELTA, Handover::SHARE);
  auto reply = ask<std::string>(sys(), a, fullcopy_atom::value, uint64_t{1});
  ASSERT_FALSE(reply);
  EXPECT_NE(sys().render(reply.error()).find("publisher 'pub' has published nothing on disk"),
            std::string::npos)
      << sys().render(reply.error());
}

TEST_F(PublisherKind, ErrorsNameThePublisherAndTheProblem) {
  auto a = spawn(Transport::COLOCATED, Handover::SHARE);
  auto wrong_port =
      ask<node_reply>(sys(), a, process_atom::value, std::string("batches"), wrap(weights_ref{}));
  ASSERT_FALSE(wrong_port);
  EXPECT_NE(sys()
                .render(wrong_port.error())
                .find("publisher 'pub': port 'batches' expects a weights_ref"),
            std::string::npos)
      << sys().render(wrong_port.error());
  weights_ref ref;
  ref.version = 1;
  ref.channel = "nobody";
  auto missing = ask<node_reply>(sys(), a, process_atom::value, std::string("weights"), wrap(ref));
  ASSERT_FALSE(missing);
  EXPECT_NE(sys().render(missing.error()).find("no trainer 'nobody'"), std::string::npos)
      << sys().render(missing.error());
  // NCCL transports: at least one engine rank; weights on the CPU are refused naming the device.
  params_of<schema::PublisherParams> p;
  p->setTransport(Transport::BROADCAST);
  p->setEngines(0);
  auto problems = kinds_.find("publisher")->check_params(capnp::toDynamic(p->asReader()));
  ASSERT_FALSE(problems.empty());
  EXPECT_EQ(problems.back().field, "engines");
  EXPECT_EQ(problems.back().what, "must be at least 1 for broadcast");
  EXPECT_THROW(kinds_.find("publisher")->spawn(sys(), p.setup()), std::invalid_argument);
  params_of<schema::PublisherParams> none_kept;
  none_kept->setKeepVersions(0);
  problems = kinds_.find("publisher")->check_params(capnp::toDynamic(none_kept->asReader()));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].text(), "keepVersions: must be at least 1");
#ifdef MILESRT_HAVE_NCCL
  auto b = spawn(Transport::BROADCAST, Handover::SHARE);
  ref.channel = "trainer";
  auto on_cpu = ask<node_reply>(sys(), b, process_atom::value, std::string("weights"), wrap(ref));
  ASSERT_FALSE(on_cpu);
  EXPECT_NE(sys().render(on_cpu.error()).find("moves weights between GPUs"), std::string::npos)
      << sys().render(on_cpu.error());
#endif
}

}  // namespace
}  // namespace milesrt::publisher
