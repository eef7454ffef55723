#include "actors/environment/calculator_env.hpp"

#include <cctype>
#include <limits>

#include "actors/environment/environment.hpp"
#include "actors/lib/tasks/math_answer.hpp"
#include "runtime/core/untrusted_text.hpp"

namespace milesrt::environment {
namespace {

/// A recursive-descent parser over the expression: expr = term (('+'|'-') term)*,
/// term = factor (('*'|'/') factor)*, factor = '-' factor | '(' expr ')' | digits.
class parser {
 public:
  explicit parser(std::string_view s) : s_(s) {}

  calculation run() {
    calculation c;
    int64_t v = 0;
    if (expr(v)) {
      skip();
      if (pos_ < s_.size()) fail("unexpected '" + std::string(1, s_[pos_]) + "'");
    }
    if (!error_.empty()) {
      c.error = error_;
      return c;
    }
    c.ok = true;
    c.value = v;
    return c;
  }

 private:
  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool fail(const std::string& what) {
    if (error_.empty()) error_ = what + " at " + std::to_string(pos_);
    return false;
  }
  bool expr(int64_t& v) {
    if (!term(v)) return false;
    for (skip(); pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-'); skip()) {
      const char op = s_[pos_++];
      int64_t r = 0;
      if (!term(r)) return false;
      const bool over =
          op == '+' ? __builtin_add_overflow(v, r, &v) : __builtin_sub_overflow(v, r, &v);
      if (over) return fail("overflow");
    }
    return true;
  }
  bool term(int64_t& v) {
    if (!factor(v)) return false;
    for (skip(); pos_ < s_.size() && (s_[pos_] == '*' || s_[pos_] == '/'); skip()) {
      const char op = s_[pos_++];
      int64_t r = 0;
      if (!factor(r)) return false;
      if (op == '*') {
        if (__builtin_mul_overflow(v, r, &v)) return fail("overflow");
        continue;
      }
      if (r == 0) return fail("division by zero");
      if (v == std::numeric_limits<int64_t>::min() && r == -1) return fail("overflow");
      v /= r;
    }
    return true;
  }
  bool factor(int64_t& v) {
    skip();
    if (pos_ >= s_.size()) return fail("expected a number");
    if (s_[pos_] == '-') {
      ++pos_;
      if (!factor(v)) return false;
      if (v == std::numeric_limits<int64_t>::min()) return fail("overflow");
      v = -v;
      return true;
    }
    if (s_[pos_] == '(') {
      ++pos_;
      if (++depth_ > 64) return fail("nested too deep");
      if (!expr(v)) return false;
      skip();
      if (pos_ >= s_.size() || s_[pos_] != ')') return fail("expected ')'");
      ++pos_;
      --depth_;
      return true;
    }
    if (!std::isdigit(static_cast<unsigned char>(s_[pos_])))
      return fail("unexpected '" + std::string(1, s_[pos_]) + "'");
    v = 0;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      if (__builtin_mul_overflow(v, int64_t{10}, &v) ||
          __builtin_add_overflow(v, int64_t{s_[pos_] - '0'}, &v))
        return fail("overflow");
      ++pos_;
    }
    return true;
  }

  std::string_view s_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::string error_;
};

/// The tool's answer to one call: the value, or "error: ...".
std::string run_call(const json& call, bool tool_on, bool& failed) {
  failed = true;
  if (!tool_on) return "error: no tools in this episode";
  const auto& f = call.value("function", json::object());
  const std::string name = f.value("name", "");
  if (name != "calculate") return "error: unknown tool '" + name + "' (there is calculate)";
  json args = f.value("arguments", json("{}"));
  // The model wrote the arguments: their nesting is bounded before they are parsed.
  if (args.is_string()) {
    const auto& text = args.get_ref<const std::string&>();
    args = runtime::json_nesting_problem(text).empty() ? json::parse(text, nullptr, false) : json();
  }
  if (!args.is_object() || !args.contains("expression") || !args["expression"].is_string())
    return "error: calculate takes {\"expression\": string}";
  auto c = calculate(args["expression"].get<std::string>());
  if (!c.ok) return "error: " + c.error;
  failed = false;
  return std::to_string(c.value);
}

class calculator_episode final : public episode {
 public:
  calculator_episode(task t, bool tool_on) : task_(std::move(t)), tool_on_(tool_on) {}

  observation reset() override {
    observation o;
    if (!task_.messages.empty()) {
      o.messages = task_.messages;
    } else {
      o.messages.push_back({{"role", "user"}, {"content", task_.prompt}});
    }
    return o;
  }

  observation step(const json& message) override {
    observation o;
    const auto calls = message.value("tool_calls", json::array());
    if (calls.is_array() && !calls.empty()) {
      for (const auto& call : calls) {
        bool failed = false;
        std::string answer = run_call(call, tool_on_, failed);
        o.tool_calls++;
        o.tool_errors += failed ? 1 : 0;
        o.messages.push_back({{"role", "tool"},
                              {"tool_call_id", call.value("id", "")},
                              {"content", std::move(answer)}});
      }
      return o;
    }
    const auto& content = message.value("content", json(""));
    const std::string text = content.is_string() ? content.get<std::string>() : "";
    o.reward = tasks::judge_math(text, task_.label).correct ? 1.0 : 0.0;
    o.done = true;
    return o;
  }

 private:
  task task_;
  bool tool_on_;
};

class calculator final : public environment {
 public:
  std::string configure(const json& options) override {
    for (const auto& [key, value] : options.items()) {
      if (key != "tool") return "options." + key + ": unknown (calculator takes: tool)";
      if (!value.is_boolean()) return "options.tool: expected true or false";
      tool_on_ = value.get<bool>();
    }
    return "";
  }

  json tools() const override {
    if (!tool_on_) return json::array();
    return json::parse(R"([{"type": "function", "function": {
      "name": "calculate",
      "description": "Evaluates + - * / on integers (integer division).",
      "parameters": {"type": "object",
                     "properties": {"expression": {"type": "string"}},
                     "required": ["expression"]}}}])");
  }

  std::unique_ptr<episode> open(const task& t, const std::string&) override {
    return std::make_unique<calculator_episode>(t, tool_on_);
  }

 private:
  bool tool_on_ = true;
};

}  // namespace

calculation calculate(std::string_view expression) { return parser(expression).run(); }

std::unique_ptr<environment> make_calculator_environment() {
  return std::make_unique<calculator>();
}

}  // namespace milesrt::environment
