#include "runtime/metrics/metrics_writer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include <unistd.h>

namespace milesrt::runtime {
namespace {
namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A run killed after logging step 5 (and while writing step 6) resumes from checkpoint 3: steps 4
// and 5 are trained again, so their old lines go, and the torn line with them.
TEST(MetricsWriter, ResumeCutsTheLogBackToTheCheckpoint) {
  fs::path dir = fs::temp_directory_path() / ("milesrt-metrics-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    metrics_writer w(dir, "g", "", 10, nullptr, false);
    for (uint64_t s = 1; s <= 5; ++s) {
      step_record r;
      r.step = r.version = s;
      r.batch_origins = {2 * s - 1, 2 * s};
      w.on_step(r);
    }
  }
  std::ofstream(dir / "metrics.jsonl", std::ios::app) << "{\"step\": 6, \"vers";
  keep_steps_through(dir / "metrics.jsonl", 3);
  std::istringstream lines(read(dir / "metrics.jsonl"));
  std::string line;
  uint64_t expect = 1;
  while (std::getline(lines, line)) {
    auto r = step_record_from_json(nlohmann::json::parse(line));
    EXPECT_EQ(r.step, expect);
    EXPECT_EQ(r.batch_origins, (std::vector<uint64_t>{2 * expect - 1, 2 * expect}));
    ++expect;
  }
  EXPECT_EQ(expect, 4u);
  // The resumed run appends after step 3.
  {
    metrics_writer w(dir, "g", "", 10, nullptr, true);
    step_record r;
    r.step = r.version = 4;
    w.on_step(r);
  }
  const std::string log = read(dir / "metrics.jsonl");
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 4);
  // No log yet: nothing to cut.
  keep_steps_through(dir / "none.jsonl", 3);
  EXPECT_FALSE(fs::exists(dir / "none.jsonl"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace milesrt::runtime
