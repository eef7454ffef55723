#pragma once
/// The built-in `calculator` environment: the task is the prompt (an arithmetic question), the
/// model may call the tool `calculate` ({"expression": "37*86"}) as often as it likes, and its
/// first reply without a tool call is its answer, checked against the task's label by value
/// (tasks::judge_math): reward 1 when right, 0 otherwise; the episode is then done.
///
/// Options: {"tool": true} offers the tool; with false the model is offered none and any call it
/// makes is answered with an error (the same task without the tool).

#include <cstdint>
#include <string>
#include <string_view>

namespace milesrt::environment {

/// What `calculate` gives: the value, or why there is none.
struct calculation {
  bool ok = false;
  int64_t value = 0;
  std::string error;
};

/// Evaluates an expression of integers with + - * / (integer division, truncating), unary minus
/// and parentheses, with the usual precedence, in 64-bit integers: an overflow, a division by
/// zero or a malformed expression is an error naming it and where ("unexpected 'x' at 3").
calculation calculate(std::string_view expression);

}  // namespace milesrt::environment
