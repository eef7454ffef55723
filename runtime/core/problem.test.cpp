#include "runtime/core/problem.hpp"

#include <gtest/gtest.h>

#include "runtime/core/failure.hpp"

namespace milesrt {
namespace {

TEST(Problem, TextLeavesOutWhatIsNotKnown) {
  EXPECT_EQ(problem("limit", "must be > 0").text(), "limit: must be > 0");
  EXPECT_EQ(problem("", "no graph").text(), "no graph");
  EXPECT_EQ(file_problem("g.capnp", "no such graph file").text(), "g.capnp: no such graph file");
  EXPECT_EQ(file_problem("g.capnp", "expected ')'", 12, 3).text(), "g.capnp:12:3: expected ')'");
  EXPECT_EQ(file_problem("g.capnp", "bad", 12).text(), "g.capnp:12: bad");
  auto p = place_problem("g.capnp", "actor 'stage'", "field 'kind': unknown");
  EXPECT_EQ(p.text(), "g.capnp: actor 'stage': field 'kind': unknown");
  p.field = "params.stage.limit";
  EXPECT_EQ(p.text(), "g.capnp: actor 'stage': params.stage.limit: field 'kind': unknown");
}

TEST(Problem, WithinPutsTheEnclosingFieldFirst) {
  EXPECT_EQ(within("retry", {"limit", "must be at least 1"}).field, "retry.limit");
  EXPECT_EQ(within("params.stage", within("retry", {"limit", "x"})).field,
            "params.stage.retry.limit");
  EXPECT_EQ(within("retry", {"", "x"}).field, "retry");
  EXPECT_EQ(within("", {"limit", "x"}).field, "limit");
  problem_list out{{"a", "first"}};
  add_within(out, "retry", {{"limit", "r"}, {"delay", "s"}});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(to_text(out), "a: first\nretry.limit: r\nretry.delay: s");
}

TEST(Problem, ALoadersRefusalBecomesAProblemOfItsField) {
  // problem_error is bad input to the error model, and keeps its problem for a check.
  try {
    throw problem_error({"tool", "expected true or false"});
  } catch (const std::exception& e) {
    EXPECT_EQ(classify(e), errc::bad_input);
    const problem p = problem_of("options", e);
    EXPECT_EQ(p.field, "options.tool");
    EXPECT_EQ(p.what, "expected true or false");
  }
  const problem q = problem_of("url", std::invalid_argument("no host"));
  EXPECT_EQ(q.text(), "url: no host");
}

}  // namespace
}  // namespace milesrt
