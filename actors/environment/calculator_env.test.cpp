// The calculator environment: its expression evaluator (precedence, parentheses, unary minus,
// integer division, and each error named), and its episodes: the opening message, a tool call
// answered, a wrong call counted as a tool error, the tool switched off, the answer checked.
#include "actors/environment/calculator_env.hpp"

#include <gtest/gtest.h>

#include "actors/environment/environment.hpp"

namespace milesrt::environment {
namespace {

int64_t value(const std::string& e) {
  auto c = calculate(e);
  EXPECT_TRUE(c.ok) << e << ": " << c.error;
  return c.value;
}

std::string error(const std::string& e) {
  auto c = calculate(e);
  EXPECT_FALSE(c.ok) << e << " gave " << c.value;
  return c.error;
}

TEST(Calculate, EvaluatesIntegersWithPrecedence) {
  EXPECT_EQ(value("37*86"), 3182);
  EXPECT_EQ(value("2+3*4"), 14);
  EXPECT_EQ(value("(2+3)*4"), 20);
  EXPECT_EQ(value(" 10 - 4 - 3 "), 3);
  EXPECT_EQ(value("100/7"), 14);
  EXPECT_EQ(value("-7/2"), -3);
  EXPECT_EQ(value("2*-3"), -6);
  EXPECT_EQ(value("--5"), 5);
  EXPECT_EQ(value("9223372036854775807"), INT64_MAX);
}

TEST(Calculate, NamesWhatIsWrong) {
  EXPECT_EQ(error("1/0"), "division by zero at 3");
  EXPECT_EQ(error("9223372036854775807+1"), "overflow at 21");
  EXPECT_EQ(error("99999999999999999999"), "overflow at 18");
  EXPECT_EQ(error("2+"), "expected a number at 2");
  EXPECT_EQ(error("2+x"), "unexpected 'x' at 2");
  EXPECT_EQ(error("(1+2"), "expected ')' at 4");
  EXPECT_EQ(error("1 2"), "unexpected '2' at 2");
  EXPECT_EQ(error(""), "expected a number at 0");
}

json call(const std::string& name, const json& args) {
  return {{"id", "call_0_0"},
          {"type", "function"},
          {"function", {{"name", name}, {"arguments", args.dump()}}}};
}

json with_calls(json calls) {
  return {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", std::move(calls)}};
}

std::unique_ptr<environment> calculator(const std::string& options) {
  auto env = make_calculator_environment();
  EXPECT_EQ(env->configure(json::parse(options)), "");
  return env;
}

TEST(CalculatorEnvironment, RunsToolCallsAndChecksTheAnswer) {
  auto env = calculator("{}");
  ASSERT_EQ(env->tools().size(), 1u);
  EXPECT_EQ(env->tools()[0]["function"]["name"], "calculate");
  task t;
  t.prompt = "37*86";
  t.label = "3182";
  auto ep = env->open(t, "g0-e0");
  auto first = ep->reset();
  EXPECT_EQ(first.messages, json::parse(R"([{"role": "user", "content": "37*86"}])"));
  auto o = ep->step(with_calls({call("calculate", {{"expression", "37*86"}})}));
  EXPECT_FALSE(o.done);
  EXPECT_EQ(o.tool_calls, 1u);
  EXPECT_EQ(o.tool_errors, 0u);
  EXPECT_EQ(o.messages,
            json::parse(R"([{"role": "tool", "tool_call_id": "call_0_0", "content": "3182"}])"));
  o = ep->step({{"role", "assistant"}, {"content", "3182"}});
  EXPECT_TRUE(o.done);
  EXPECT_EQ(o.reward, 1.0);
  auto wrong = env->open(t, "g0-e1");
  wrong->reset();
  o = wrong->step({{"role", "assistant"}, {"content", "3181"}});
  EXPECT_TRUE(o.done);
  EXPECT_EQ(o.reward, 0.0);
}

TEST(CalculatorEnvironment, CountsCallsItCannotRun) {
  auto env = calculator("{}");
  task t{"2+2", json::array(), "4", 0};
  auto ep = env->open(t, "e");
  ep->reset();
  auto o = ep->step(with_calls({call("search", {{"q", "x"}}), call("calculate", {{"expr", "1"}}),
                                call("calculate", {{"expression", "1/0"}})}));
  EXPECT_EQ(o.tool_calls, 3u);
  EXPECT_EQ(o.tool_errors, 3u);
  ASSERT_EQ(o.messages.size(), 3u);
  EXPECT_EQ(o.messages[0]["content"], "error: unknown tool 'search' (there is calculate)");
  EXPECT_EQ(o.messages[1]["content"], "error: calculate takes {\"expression\": string}");
  EXPECT_EQ(o.messages[2]["content"], "error: division by zero at 3");
}

TEST(CalculatorEnvironment, WithoutTheToolOffersNoneAndRefusesCalls) {
  auto env = calculator(R"({"tool": false})");
  EXPECT_TRUE(env->tools().empty());
  task t{"2+2", json::array(), "4", 0};
  auto ep = env->open(t, "e");
  ep->reset();
  auto o = ep->step(with_calls({call("calculate", {{"expression", "2+2"}})}));
  EXPECT_EQ(o.tool_errors, 1u);
  EXPECT_EQ(o.messages[0]["content"], "error: no tools in this episode");
}

TEST(CalculatorEnvironment, ChatTasksAndBadOptions) {
  auto env = calculator("{}");
  task t;
  t.messages = json::parse(R"([{"role": "system", "content": "Use the tool."},
                               {"role": "user", "content": "6*7"}])");
  t.label = "42";
  EXPECT_EQ(env->open(t, "e")->reset().messages, t.messages);
  auto bad = make_calculator_environment();
  EXPECT_EQ(bad->configure(json::parse(R"({"tools": true})")),
            "options.tools: unknown (calculator takes: tool)");
  EXPECT_EQ(bad->configure(json::parse(R"({"tool": 1})")), "options.tool: expected true or false");
}

TEST(Environments, TheBuiltinsAreRegistered) {
  auto r = builtin_environments();
  EXPECT_EQ(r.names(), (std::vector<std::string>{"calculator", "remote"}));
  EXPECT_EQ(r.check("chess"), "'chess' is not one of: calculator, remote");
  auto refusal = [](const std::string& text) {
    try {
      parse_options(text, "options");
    } catch (const problem_error& e) {
      return e.get().field + " | " + e.get().what;
    }
    return std::string("accepted");
  };
  EXPECT_EQ(refusal("[1]"), "options | expected a JSON object, got '[1]'");
  EXPECT_EQ(refusal("{"), "options | not JSON: '{'");
  EXPECT_EQ(refusal("{}"), "accepted");
}

}  // namespace
}  // namespace milesrt::environment
