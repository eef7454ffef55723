#include "runtime/core/progress.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace milesrt::runtime {

TEST(ProgressMeter, BarShowsTheFraction) {
  EXPECT_EQ(progress_meter::bar("eval", 9, 20, 1.25),
            "eval [##############................]  45% 9/20 1.2 s");
  EXPECT_EQ(progress_meter::bar("x", 0, 0, 0), "x [##############################] 100% 0/0 0.0 s");
}

TEST(ProgressMeter, PlainLinesWhenNotATerminal) {
  std::FILE* f = std::tmpfile();
  {
    progress_meter m(f, "checkpoint step 4", 3);
    m.update(1);  // within 2 s of the start: no line
    m.update(3);
  }
  std::rewind(f);
  char buf[512] = {0};
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  std::string text(buf, n);
  EXPECT_EQ(text.rfind("checkpoint step 4: 0/3\ncheckpoint step 4: 3/3 in 0.", 0), 0u) << text;
  progress_meter quiet(nullptr, "nothing", 5);  // null: no output, no crash
  quiet.update(5);
}

}  // namespace milesrt::runtime
