#include "runtime/checkpoint/checkpoint.hpp"

#include <fstream>

#include "runtime/testing/scratch_graph.hpp"

namespace milesrt::runtime {
namespace {
namespace fs = std::filesystem;

class Checkpoint : public testing::scratch_test {};

TEST_F(Checkpoint, CommitThenReadBack) {
  checkpoint_writer w(dir_, 4);
  w.put_bytes("driver.bin", {1, 2, 3});
  std::ofstream(w.actor_dir("learner-0") / "weights.txt") << "4\n";
  auto final_dir = w.commit({{"step", "4"}});
  EXPECT_EQ(final_dir, dir_ / "checkpoints" / "step-4");
  EXPECT_FALSE(fs::exists(dir_ / "checkpoints" / "step-4.tmp"));
  checkpoint_reader r(final_dir);
  EXPECT_EQ(r.get_bytes("driver.bin"), (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(r.fields().at("step"), "4");
  EXPECT_TRUE(fs::exists(r.actor_dir("learner-0") / "weights.txt"));
  EXPECT_EQ(latest_checkpoint(dir_), final_dir);
}

TEST_F(Checkpoint, NewestCompleteWinsAndIncompleteOnesAreSkipped) {
  for (uint64_t step : {2, 4, 6}) {
    checkpoint_writer w(dir_, step);
    w.put_bytes("driver.bin", std::vector<uint8_t>(step, 7));
    w.commit({});
  }
  // step-6 loses a byte; step-8 never got its manifest; step-9.tmp was never renamed.
  fs::resize_file(dir_ / "checkpoints" / "step-6" / "driver.bin", 5);
  fs::create_directories(dir_ / "checkpoints" / "step-8");
  std::ofstream(dir_ / "checkpoints" / "step-8" / "driver.bin") << "x";
  checkpoint_writer(dir_, 9).put_bytes("driver.bin", {1});
  EXPECT_EQ(latest_checkpoint(dir_), dir_ / "checkpoints" / "step-4");
  try {
    checkpoint_reader r(dir_ / "checkpoints" / "step-6");
    FAIL() << "an incomplete checkpoint was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("file driver.bin has 5 bytes, the manifest says 6"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(Checkpoint, NoCheckpointAtAll) { EXPECT_FALSE(latest_checkpoint(dir_ / "nothing")); }

}  // namespace
}  // namespace milesrt::runtime
