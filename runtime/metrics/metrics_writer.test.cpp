#include "runtime/metrics/metrics_writer.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "runtime/metrics/live_file_sink.hpp"

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

// A write that fails (metrics.jsonl on a full device) throws naming the file and the reason, and
// so does every step after it; the summary claims only the steps the log holds, and a summary
// that cannot be written throws too.
TEST(MetricsWriter, AFailedWriteThrowsAndTheSummaryClaimsOnlyRecordedSteps) {
  fs::path dir = fs::temp_directory_path() / ("milesrt-metrics-full-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::create_symlink("/dev/full", dir / "metrics.jsonl");
  metrics_writer w(dir, "g", "", 10, nullptr, true);
  step_record r;
  r.step = r.version = 4;
  try {
    w.on_step(r);
    ADD_FAILURE() << "a failed write went unnoticed";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot write " + (dir / "metrics.jsonl").string() + ": No space left on device");
  }
  r.step = 5;
  EXPECT_THROW(w.on_step(r), std::runtime_error);
  run_outcome o;
  o.steps = 5;
  w.on_finish(o);
  EXPECT_EQ(nlohmann::json::parse(read(dir / "summary.json"))["steps"], 3u);
  fs::remove(dir / "summary.json");
  fs::create_symlink("/dev/full", dir / "summary.json");
  EXPECT_THROW(w.on_finish(o), std::runtime_error);
  fs::remove_all(dir);
}

// A log with a line cut short before the checkpoint's step (a write that failed, then a run that
// went on) is refused by a resume, naming the step it lacks, rather than resumed without it.
TEST(MetricsWriter, ResumeRefusesALogLackingAStepBeforeTheCheckpoint) {
  fs::path dir = fs::temp_directory_path() / ("milesrt-metrics-cut-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "metrics.jsonl")
      << "{\"step\": 1}\n{\"step\": 2, \"vers\n{\"step\": 3}\n{\"step\": 4}\n";
  try {
    keep_steps_through(dir / "metrics.jsonl", 3);
    ADD_FAILURE() << "a log lacking step 2 was resumed";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              (dir / "metrics.jsonl").string() +
                  " lacks step 2 of the 3 the checkpoint holds (a line cut short or lost): "
                  "it cannot be resumed without losing that step's record");
  }
  fs::remove_all(dir);
}

// A run's error may quote a remote server's bytes, which need not be UTF-8 (an answer, or an
// excerpt cut inside a character): summary.json and live.json are written with the bytes
// replaced, where a plain dump would throw in the driver and lose the error.
TEST(MetricsWriter, AnErrorThatIsNotUtf8IsWrittenReplaced) {
  fs::path dir = fs::temp_directory_path() / ("milesrt-metrics-utf8-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string error = "POST http://127.0.0.1:9/score: HTTP 500: \xE2\x82";
  const std::string replaced = "POST http://127.0.0.1:9/score: HTTP 500: \xEF\xBF\xBD";
  metrics_writer w(dir, "g", "", 10, nullptr, false);
  run_outcome o;
  o.error = error;
  EXPECT_NO_THROW(w.on_finish(o));
  EXPECT_EQ(nlohmann::json::parse(read(dir / "summary.json"))["error"], replaced);
  live_file_sink live(dir, {});
  live_view v;
  v.state = "failed";
  v.error = error;
  EXPECT_NO_THROW(live.on_live(v));
  EXPECT_EQ(nlohmann::json::parse(read(dir / "live.json"))["error"], replaced);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace milesrt::runtime
