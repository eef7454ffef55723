#pragma once
/// Final answers of math completions: where they are in the text, and whether two are the same
/// value. Pure functions, used by the `math_reward` kind.

#include <optional>
#include <string>

namespace milesrt::tasks {

/// The final answer of a completion: the content of the last \boxed{...} (nested braces kept),
/// else what follows the last "answer is" / "answer:" / "####" on its line (case-insensitive),
/// else the last number in the text. nullopt when there is none.
std::optional<std::string> extract_answer(const std::string& text);

/// Whether two answers are equal: numbers by value (integers, decimals, fractions a/b and
/// \frac{a}{b}, thousands separators, a leading +, trailing zeros, surrounding $ and spaces),
/// anything else as text after trimming spaces and surrounding $.
bool answers_equal(const std::string& a, const std::string& b);

/// How a completion fared against a label.
struct math_judgement {
  bool found = false;    ///< an answer could be extracted
  bool correct = false;  ///< ... and it equals the label
};

/// Judges `completion` against `label` (a label holding \boxed{...} is reduced to its content).
math_judgement judge_math(const std::string& completion, const std::string& label);

/// The reward of a completion: `correct`, `wrong`, or `no_answer` when none can be extracted.
double math_score(const std::string& completion, const std::string& label, double correct,
                  double wrong, double no_answer);

}  // namespace milesrt::tasks
