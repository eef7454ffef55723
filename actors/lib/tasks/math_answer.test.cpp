#include "actors/lib/tasks/math_answer.hpp"

#include <gtest/gtest.h>

namespace milesrt::tasks {
namespace {

std::string extracted(const std::string& text) { return extract_answer(text).value_or("<none>"); }

TEST(ExtractAnswer, TakesTheLastBoxedWithNestedBraces) {
  EXPECT_EQ(extracted("so \\boxed{3} or rather \\boxed{\\frac{1}{2}}."), "\\frac{1}{2}");
  EXPECT_EQ(extracted("\\boxed{{a}+{b}}"), "{a}+{b}");
  EXPECT_EQ(extracted("\\boxed {42} and the answer is 7"), "42");
  EXPECT_EQ(extracted("\\fbox{9}"), "9");
  EXPECT_EQ(extracted("$\\boxed{$5$}$"), "5");
  EXPECT_EQ(extracted("\\boxed{\\{1, 2\\}}"), "\\{1, 2\\}");
  // An unclosed or empty box does not count.
  EXPECT_EQ(extracted("\\boxed{12} then \\boxed{13"), "12");
  EXPECT_EQ(extracted("\\boxed{} the answer is 4"), "4");
}

TEST(ExtractAnswer, FallsBackToAnswerMarkers) {
  EXPECT_EQ(extracted("Work... The answer is 42."), "42");
  EXPECT_EQ(extracted("ANSWER: $\\frac{3}{4}$\nthanks"), "\\frac{3}{4}");
  EXPECT_EQ(extracted("answer: 1\nFinal answer: 2"), "2");
  EXPECT_EQ(extracted("**Answer:** 17"), "17");
  EXPECT_EQ(extracted("The final answer is: 8"), "8");
  EXPECT_EQ(extracted("lots of steps 3 + 4\n#### 7"), "7");
  EXPECT_EQ(extracted("The answer is blue"), "blue");
  EXPECT_EQ(extracted("the answer isn't obvious, it is 5"), "5");  // a number, not "n't"
}

TEST(ExtractAnswer, FallsBackToTheLastNumber) {
  EXPECT_EQ(extracted("3 apples and 4 pears make 7"), "7");
  EXPECT_EQ(extracted("it costs 1,234,567 dollars."), "1,234,567");
  EXPECT_EQ(extracted("pi is about 3.14."), "3.14");
  EXPECT_EQ(extracted("the temperature is -5 today"), "-5");
  EXPECT_EQ(extracted("x-5"), "5");
  EXPECT_EQ(extracted("a ratio of 3/4"), "3/4");
  EXPECT_EQ(extracted("1,2,3"), "3");
  EXPECT_EQ(extracted("no numbers here"), "<none>");
  EXPECT_EQ(extracted(""), "<none>");
}

TEST(AnswersEqual, ComparesNumbersByValue) {
  EXPECT_TRUE(answers_equal("42", "42"));
  EXPECT_TRUE(answers_equal("42", "+42"));
  EXPECT_TRUE(answers_equal("42.0", "42"));
  EXPECT_TRUE(answers_equal("42.000", "42"));
  EXPECT_TRUE(answers_equal(" $42$ ", "42"));
  EXPECT_TRUE(answers_equal("1,000", "1000"));
  EXPECT_TRUE(answers_equal("1,234,567.50", "1234567.5"));
  EXPECT_TRUE(answers_equal("1{,}000", "1000"));
  EXPECT_TRUE(answers_equal("1\\,000", "1000"));
  EXPECT_TRUE(answers_equal("0.5", "1/2"));
  EXPECT_TRUE(answers_equal("\\frac{1}{2}", "0.5"));
  EXPECT_TRUE(answers_equal("\\dfrac{6}{4}", "3/2"));
  EXPECT_TRUE(answers_equal("-\\frac{1}{2}", "-0.5"));
  EXPECT_TRUE(answers_equal("\\frac{-1}{2}", "-1/2"));
  EXPECT_TRUE(answers_equal(".5", "0.5"));
  EXPECT_TRUE(answers_equal("\\$5", "5"));
  EXPECT_TRUE(answers_equal("x = 5", "5"));
  EXPECT_TRUE(answers_equal("\\frac{\\frac{1}{2}}{2}", "0.25"));
  EXPECT_TRUE(answers_equal("123456789012345678901234567890", "123456789012345678901234567890.0"));
}

TEST(AnswersEqual, TellsDifferentValuesApart) {
  EXPECT_FALSE(answers_equal("42", "43"));
  EXPECT_FALSE(answers_equal("-42", "42"));
  EXPECT_FALSE(answers_equal("1/3", "0.333333"));
  EXPECT_FALSE(answers_equal("0.1", "0.10000001"));
  EXPECT_FALSE(answers_equal("1,00", "100"));  // not a thousands separator: compared as text
  EXPECT_FALSE(answers_equal("12,34,567", "1234567"));
  EXPECT_FALSE(answers_equal("5", "five"));
  EXPECT_FALSE(answers_equal("1/0", "1"));
  EXPECT_FALSE(answers_equal("", "0"));
}

TEST(AnswersEqual, ComparesOtherAnswersAsTrimmedText) {
  EXPECT_TRUE(answers_equal("  blue ", "blue"));
  EXPECT_TRUE(answers_equal("$x^2$", "x^2"));
  EXPECT_TRUE(answers_equal("(1, 2)", "(1, 2)"));
  EXPECT_FALSE(answers_equal("Blue", "blue"));
  EXPECT_FALSE(answers_equal("(1,2)", "(1, 2)"));
}

TEST(MathScore, GivesCorrectWrongOrNoAnswer) {
  EXPECT_EQ(math_score("so \\boxed{12}", "12", 1, -1, -2), 1);
  EXPECT_EQ(math_score("so \\boxed{13}", "12", 1, -1, -2), -1);
  EXPECT_EQ(math_score("I don't know", "12", 1, -1, -2), -2);
  EXPECT_EQ(math_score("The answer is 1/2.", "\\frac{1}{2}", 1, 0, 0), 1);
  EXPECT_EQ(math_score("#### 1,200", "1200", 1, 0, 0), 1);
  // A label written as a solution: its boxed content counts.
  EXPECT_EQ(math_score("\\boxed{7}", "so it is \\boxed{7}", 1, 0, 0), 1);
  auto j = judge_math("no idea", "3");
  EXPECT_FALSE(j.found);
  EXPECT_FALSE(j.correct);
}

}  // namespace
}  // namespace milesrt::tasks
