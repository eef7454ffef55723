#include "runtime/core/problem.hpp"

#include <gtest/gtest.h>

#include "runtime/core/failure.hpp"

namespace milesrt {
namespace {

TEST(Problem, TextLeavesOutWhatIsNotKnown) {
  EXPECT_EQ(problem("lr", "must be > 0").text(), "lr: must be > 0");
  EXPECT_EQ(problem("", "no graph").text(), "no graph");
  EXPECT_EQ(file_problem("g.capnp", "no such graph file").text(), "g.capnp: no such graph file");
  EXPECT_EQ(file_problem("g.capnp", "expected ')'", 12, 3).text(), "g.capnp:12:3: expected ')'");
  EXPECT_EQ(file_problem("g.capnp", "bad", 12).text(), "g.capnp:12: bad");
  auto p = place_problem("g.capnp", "actor 'trainer'", "field 'kind': unknown");
  EXPECT_EQ(p.text(), "g.capnp: actor 'trainer': field 'kind': unknown");
  p.field = "params.trainer.lr";
  EXPECT_EQ(p.text(), "g.capnp: actor 'trainer': params.trainer.lr: field 'kind': unknown");
}

TEST(Problem, WithinPutsTheEnclosingFieldFirst) {
  EXPECT_EQ(within("lora", {"rank", "must be at least 1"}).field, "lora.rank");
  EXPECT_EQ(within("params.trainer", within("lora", {"rank", "x"})).field,
            "params.trainer.lora.rank");
  EXPECT_EQ(within("lora", {"", "x"}).field, "lora");
  EXPECT_EQ(within("", {"rank", "x"}).field, "rank");
  problem_list out{{"a", "first"}};
  add_within(out, "lora", {{"rank", "r"}, {"alpha", "s"}});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(to_text(out), "a: first\nlora.rank: r\nlora.alpha: s");
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
