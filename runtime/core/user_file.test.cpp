#include "runtime/core/user_file.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

namespace milesrt::runtime {
namespace {
namespace fs = std::filesystem;

// A FIFO, a device and a folder where a file is expected are named for what they are, without
// opening them (opening the FIFO would block this test forever).
TEST(UserFile, OnlyRegularFilesAreRead) {
  const fs::path dir =
      fs::temp_directory_path() / ("milesrt-user-file-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << "{}";
  fs::create_symlink(dir / "config.json", dir / "link.json");
  ASSERT_EQ(::mkfifo((dir / "fifo.json").c_str(), 0600), 0);
  EXPECT_EQ(regular_file_problem(dir / "config.json"), "");
  EXPECT_EQ(regular_file_problem(dir / "link.json"), "");
  EXPECT_EQ(regular_file_problem(dir / "fifo.json"), "a FIFO, not a regular file");
  EXPECT_EQ(regular_file_problem("/dev/null"), "a character device, not a regular file");
  EXPECT_EQ(regular_file_problem(dir), "a folder, not a regular file");
  EXPECT_EQ(regular_file_problem(dir / "none.json"), "no such file");
  EXPECT_EQ(read_regular_file(dir / "link.json"), "{}");
  try {
    read_regular_file(dir / "fifo.json");
    ADD_FAILURE() << "a FIFO was read";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), (dir / "fifo.json").string() + ": a FIFO, not a regular file");
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace milesrt::runtime
