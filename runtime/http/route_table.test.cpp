// Route patterns: methods, `{name}` parameters, which pattern wins, and what is refused.
#include "runtime/http/route_table.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace milesrt::runtime {
namespace {

using outcome = route_match::outcome;

TEST(RouteTable, MatchesMethodsAndParameters) {
  route_table t;
  EXPECT_EQ(t.add(http_method::post, "/sessions"), 0u);
  EXPECT_EQ(t.add(http_method::get, "/sessions/{id}"), 1u);
  EXPECT_EQ(t.add(http_method::del, "/sessions/{id}"), 2u);
  EXPECT_EQ(t.add(http_method::post, "/sessions/{id}/end"), 3u);
  EXPECT_EQ(t.add(http_method::post, "/sessions/{id}/v1/talk/{what}"), 4u);

  auto m = t.match(http_method::get, "/sessions/s-7");
  ASSERT_EQ(m.what, outcome::found);
  EXPECT_EQ(m.index, 1u);
  EXPECT_EQ(m.params, (std::map<std::string, std::string>{{"id", "s-7"}}));
  m = t.match(http_method::del, "/sessions/s-7");
  EXPECT_EQ(m.index, 2u);
  m = t.match(http_method::post, "/sessions/a%20b/end");
  ASSERT_EQ(m.what, outcome::found);
  EXPECT_EQ(m.index, 3u);
  EXPECT_EQ(m.params.at("id"), "a b");
  m = t.match(http_method::post, "/sessions/x/v1/talk/completions");
  ASSERT_EQ(m.what, outcome::found);
  EXPECT_EQ(m.params, (std::map<std::string, std::string>{{"id", "x"}, {"what", "completions"}}));

  m = t.match(http_method::post, "/sessions/s-7");
  EXPECT_EQ(m.what, outcome::wrong_method);
  EXPECT_EQ(m.allowed, (std::vector<http_method>{http_method::get, http_method::del}));
  EXPECT_EQ(t.methods("/sessions/s-7"),
            (std::vector<http_method>{http_method::get, http_method::del}));
  EXPECT_EQ(t.match(http_method::get, "/sessions").what, outcome::wrong_method);
  // A parameter is one whole, non-empty segment; paths match exactly.
  EXPECT_EQ(t.match(http_method::get, "/sessions/").what, outcome::no_path);
  EXPECT_EQ(t.match(http_method::get, "/sessions/a/b").what, outcome::no_path);
  EXPECT_EQ(t.match(http_method::post, "/sessions/").what, outcome::no_path);
  EXPECT_EQ(t.match(http_method::get, "/sessions/s-7/").what, outcome::no_path);
  EXPECT_EQ(t.match(http_method::get, "").what, outcome::no_path);
  EXPECT_EQ(t.match(http_method::get, "sessions/x").what, outcome::no_path);
  EXPECT_TRUE(t.methods("/nothing").empty());

  m = t.match(http_method::get, "/sessions/a%2");
  EXPECT_EQ(m.what, outcome::bad_path);
  EXPECT_EQ(m.problem, "path parameter {id}: bad percent-encoding");
  EXPECT_EQ(t.match(http_method::get, "/sessions/%zz").what, outcome::bad_path);
}

TEST(RouteTable, ALiteralSegmentWinsOverAParameter) {
  route_table t;
  t.add(http_method::get, "/a/{x}/c");
  t.add(http_method::get, "/a/{x}/{y}");
  t.add(http_method::get, "/a/b/{y}");
  t.add(http_method::get, "/{z}/b/c");
  EXPECT_EQ(t.match(http_method::get, "/a/b/c").index, 2u);  // literal at the 2nd segment
  EXPECT_EQ(t.match(http_method::get, "/a/q/c").index, 0u);
  EXPECT_EQ(t.match(http_method::get, "/a/q/r").index, 1u);
  EXPECT_EQ(t.match(http_method::get, "/q/b/c").index, 3u);
}

TEST(RouteTable, RefusesMalformedAndRepeatedPatterns) {
  route_table t;
  t.add(http_method::get, "/s/{id}");
  auto refused = [&](http_method m, const std::string& p) {
    try {
      t.add(m, p);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(added)");
  };
  EXPECT_EQ(refused(http_method::get, "/s/{other}"), "route GET /s/{other}: already routed");
  EXPECT_EQ(refused(http_method::get, "s"), "route GET s: a pattern starts with '/'");
  EXPECT_EQ(refused(http_method::post, "/s/{a}/{a}"),
            "route POST /s/{a}/{a}: parameter {a} named twice");
  for (const char* p : {"/s/x{id}", "/s/{}", "/s/{id", "/s/id}", "/s/{i-d}"}) {
    EXPECT_NE(refused(http_method::post, p).find("is not a parameter"), std::string::npos) << p;
  }
  EXPECT_EQ(refused(http_method::del, "/s/{id}"), "(added)");
  EXPECT_EQ(t.size(), 2u);
}

TEST(RouteTable, PercentDecodes) {
  std::string out;
  EXPECT_TRUE(percent_decode("a%2Fb%20c%7e", out));
  EXPECT_EQ(out, "a/b c~");
  EXPECT_TRUE(percent_decode("", out));
  EXPECT_EQ(out, "");
  EXPECT_FALSE(percent_decode("%", out));
  EXPECT_FALSE(percent_decode("ab%4", out));
  EXPECT_FALSE(percent_decode("%g0", out));
}

}  // namespace
}  // namespace milesrt::runtime
