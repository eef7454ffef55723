#include "runtime/checkpoint/checkpoint.hpp"

#include <fstream>
#include <limits>

#include "runtime/testing/flip_bytes.hpp"
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

/// Commits checkpoints at `steps`, each with a driver file and an actor's own file of 4 KiB.
void commit_steps(const fs::path& dir, std::initializer_list<uint64_t> steps) {
  for (uint64_t step : steps) {
    checkpoint_writer w(dir, step);
    w.put_bytes("driver.bin", std::vector<uint8_t>(16, uint8_t(step)));
    std::string own(4096, '\0');
    for (size_t i = 0; i < own.size(); ++i) own[i] = char((i * 31 + step) & 0xff);
    std::ofstream(w.actor_dir("learner-0") / "optimizer.bin", std::ios::binary) << own;
    w.commit({{"step", std::to_string(step)}});
  }
}

using milesrt::testing::flip_bytes;

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

TEST_F(Checkpoint, TheManifestHoldsEachFilesContentHash) {
  commit_steps(dir_, {3});
  std::ifstream in(dir_ / "checkpoints" / "step-3" / "manifest.json");
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  EXPECT_NE(text.find("\"actors/learner-0/optimizer.bin\": {"), std::string::npos) << text;
  EXPECT_NE(text.find("\"bytes\": 4096"), std::string::npos) << text;
  EXPECT_NE(text.find("\"xxh3\": \""), std::string::npos) << text;
  EXPECT_TRUE(check_checkpoint(dir_ / "checkpoints" / "step-3", 3).ok());
}

TEST_F(Checkpoint, SameSizeCorruptionIsNamedAndTheNewestValidOneChosen) {
  commit_steps(dir_, {2, 4});
  const auto newest = dir_ / "checkpoints" / "step-4";
  flip_bytes(newest / "actors" / "learner-0" / "optimizer.bin", 1000, 64);
  EXPECT_EQ(fs::file_size(newest / "actors" / "learner-0" / "optimizer.bin"), 4096u);
  auto found = find_checkpoint(dir_);
  EXPECT_EQ(found.newest, dir_ / "checkpoints" / "step-2");
  EXPECT_EQ(found.step, 2u);
  ASSERT_TRUE(found.newer_corrupt);
  EXPECT_NE(found.newer_corrupt->find("skipped checkpoint " + newest.string() +
                                      ": file actors/learner-0/optimizer.bin has content hash "),
            std::string::npos)
      << *found.newer_corrupt;
  EXPECT_EQ(joined(found.warnings), *found.newer_corrupt + "\n");
  try {
    checkpoint_reader r(newest);
    FAIL() << "a corrupt checkpoint was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer.bin has content hash"), std::string::npos)
        << e.what();
  }
  // NaNs written over a driver file of the same size: caught the same way.
  const auto older = dir_ / "checkpoints" / "step-2" / "driver.bin";
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::fstream(older, std::ios::in | std::ios::out | std::ios::binary)
      .write(reinterpret_cast<const char*>(&nan), sizeof nan);
  EXPECT_FALSE(latest_checkpoint(dir_));
  EXPECT_EQ(find_checkpoint(dir_).warnings.size(), 2u);
}

TEST_F(Checkpoint, AnUnfinishedCheckpointIsSkippedButIsNotCorrupt) {
  commit_steps(dir_, {2, 4});
  fs::remove(dir_ / "checkpoints" / "step-4" / "manifest.json");
  auto found = find_checkpoint(dir_);
  EXPECT_EQ(found.newest, dir_ / "checkpoints" / "step-2");
  EXPECT_FALSE(found.newer_corrupt);
  ASSERT_EQ(found.warnings.size(), 1u);
  EXPECT_NE(found.warnings[0].find("step-4: no manifest.json (its writing was cut off)"),
            std::string::npos)
      << found.warnings[0];
}

TEST_F(Checkpoint, StrayFoldersAreNamedAndIgnored) {
  commit_steps(dir_, {5});
  const auto root = dir_ / "checkpoints";
  for (const char* stray : {"step-99999999999999999999999", "step-18446744073709551616", "step-",
                            "step-x1", "step-007", "notes"})
    fs::create_directories(root / stray);
  std::ofstream(root / "step-9") << "a file, not a folder";
  fs::create_directories(root / "step-6.tmp");  // a checkpoint being written: passed over quietly
  auto found = find_checkpoint(dir_);
  EXPECT_EQ(found.newest, root / "step-5");
  EXPECT_FALSE(found.newer_corrupt);
  const auto text = joined(found.warnings);
  EXPECT_EQ(found.warnings.size(), 7u) << text;
  for (const char* stray : {"step-99999999999999999999999", "step-18446744073709551616", "step-x1",
                            "step-007", "notes", "step-9"})
    EXPECT_NE(text.find("ignored " + (root / stray).string() + ": not a checkpoint"),
              std::string::npos)
        << stray << "\n"
        << text;
  EXPECT_EQ(text.find("step-6.tmp"), std::string::npos) << text;
}

TEST_F(Checkpoint, MalformedManifestsAreNamedWithoutTheParsersText) {
  commit_steps(dir_, {1, 2, 3, 4, 5, 6});
  const auto root = dir_ / "checkpoints";
  auto rewrite = [&](uint64_t step, const std::string& text) {
    std::ofstream(root / ("step-" + std::to_string(step)) / "manifest.json") << text;
  };
  rewrite(6, R"({"step": "6", "files": {"driver.bin": "16"}})");
  rewrite(5, R"({"step": "5", "files": {"driver.bin": {"bytes": 16, "xxh3": 7}}})");
  rewrite(4, R"({"step": "4", "files": {"../../x": 1}})");
  rewrite(3, R"({"step": "7", "files": {}})");
  rewrite(2, R"([1, 2)");
  auto found = find_checkpoint(dir_);
  EXPECT_EQ(found.newest, root / "step-1");
  const auto text = joined(found.warnings);
  ASSERT_EQ(found.warnings.size(), 5u) << text;
  EXPECT_NE(found.warnings[0].find(
                "step-6: manifest.json: files.\"driver.bin\": expected a byte count, got string "
                "\"16\""),
            std::string::npos)
      << text;
  EXPECT_NE(found.warnings[1].find("step-5: manifest.json: files.\"driver.bin\": expected "
                                   "{\"bytes\": N, \"xxh3\": 16 hex digits}"),
            std::string::npos)
      << text;
  EXPECT_NE(found.warnings[2].find("a path outside the checkpoint folder"), std::string::npos)
      << text;
  EXPECT_NE(found.warnings[3].find("step-3: manifest.json: step is \"7\", the folder's is 3"),
            std::string::npos)
      << text;
  EXPECT_NE(found.warnings[4].find("step-2: manifest.json is not a JSON object"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("json.exception"), std::string::npos) << text;
  EXPECT_EQ(text.find("type_error"), std::string::npos) << text;
}

TEST_F(Checkpoint, AFileAddedAfterTheCommitFailsTheCheck) {
  commit_steps(dir_, {2});
  std::ofstream(dir_ / "checkpoints" / "step-2" / "actors" / "learner-0" / "extra.bin") << "x";
  auto check = check_checkpoint(dir_ / "checkpoints" / "step-2", 2);
  EXPECT_EQ(check.problem, "file actors/learner-0/extra.bin is not in manifest.json");
}

TEST_F(Checkpoint, AnOlderManifestWithoutHashesIsAcceptedOnSizesWithAWarning) {
  commit_steps(dir_, {2});
  const auto step2 = dir_ / "checkpoints" / "step-2";
  std::ofstream(step2 / "manifest.json")
      << R"({"step": "2", "files": {"driver.bin": 16, "actors/learner-0/optimizer.bin": 4096}})";
  auto found = find_checkpoint(dir_);
  EXPECT_EQ(found.newest, step2);
  ASSERT_EQ(found.warnings.size(), 1u);
  EXPECT_NE(found.warnings[0].find("has no content hashes (written by an older milesrt): only its "
                                   "files' sizes were checked"),
            std::string::npos)
      << found.warnings[0];
  EXPECT_TRUE(check_checkpoint(step2).sizes_only);
  // Its sizes are still checked.
  fs::resize_file(step2 / "driver.bin", 15);
  EXPECT_FALSE(latest_checkpoint(dir_));
}

}  // namespace
}  // namespace milesrt::runtime
