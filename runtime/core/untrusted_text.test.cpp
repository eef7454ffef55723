#include "runtime/core/untrusted_text.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace milesrt::runtime {
namespace {

TEST(UntrustedText, RepairsInvalidUtf8AsPythonDoes) {
  EXPECT_TRUE(valid_utf8("caf\xC3\xA9"));
  EXPECT_FALSE(valid_utf8("\xFF"));
  EXPECT_FALSE(valid_utf8("a\xE2\x82"));  // a cut 3-byte character
  // Python: b"a\xff\xe2\x82b".decode("utf-8", "replace") == "a\ufffd\ufffdb"
  EXPECT_EQ(lossy_utf8("a\xFF\xE2\x82"
                       "b"),
            "a\xEF\xBF\xBD\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(lossy_utf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
}

TEST(UntrustedText, ExcerptsKeepCharactersWholeAndSerialise) {
  // 'é' is two bytes: a cut at 3 bytes of "aéé" must not keep half of the second one.
  EXPECT_EQ(excerpt("a\xC3\xA9\xC3\xA9", 4), "a\xC3\xA9...");
  EXPECT_EQ(excerpt("a\xC3\xA9\xC3\xA9", 5), "a\xC3\xA9\xC3\xA9");
  EXPECT_EQ(excerpt("\xFF\xFE", 200), "\xEF\xBF\xBD\xEF\xBF\xBD");
  const std::string e = excerpt(std::string(199, 'x') + "\xE2\x82\xAC" + "tail");
  EXPECT_TRUE(valid_utf8(e));
  EXPECT_NO_THROW((void)nlohmann::json(e).dump());
}

TEST(UntrustedText, BoundsJsonNestingOutsideStrings) {
  EXPECT_EQ(json_nesting_problem("[[[1]]]", 3), "");
  EXPECT_NE(json_nesting_problem("[[[[1]]]]", 3), "");
  EXPECT_EQ(json_nesting_problem(R"({"a": "[[[[[[", "b": "\"[[[["})", 2), "");
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string p = json_nesting_problem(deep);
  EXPECT_NE(p.find("512"), std::string::npos) << p;
  EXPECT_EQ(json_nesting_problem(std::string(512, '{') + std::string(512, '}')), "");
}

}  // namespace
}  // namespace milesrt::runtime
