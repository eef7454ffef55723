#pragma once
/// One type for what validation finds (docs/errors.md): every check of an input (a graph file, an
/// actor's params, a file or URL a param names, a `--set` assignment) returns a `problem_list`,
/// each located (the file, its line and column, the place in it, the field) and saying what is
/// wrong. Checks return these and never throw for bad input; loaders that cannot go on throw
/// std::invalid_argument (the error model's bad input, runtime/core/failure.hpp), which a check
/// turns into a problem with `problem_of`.

#include <exception>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace milesrt {

struct problem {
  problem() = default;
  /// A problem of a field: `{"limit", "must be > 0"}`.
  problem(std::string field_path, std::string what_is_wrong)
      : field(std::move(field_path)), what(std::move(what_is_wrong)) {}

  std::string field;    ///< the field it is about, a dotted path ("retry.limit"); empty when none
  std::string what;     ///< what is wrong
  std::string file;     ///< the input file, when there is one
  unsigned line = 0;    ///< 1-based; 0 when unknown
  unsigned column = 0;  ///< 1-based; 0 when unknown
  std::string where;    ///< the place in the file: "actor 'stage'", "edge 2 (a -> b)"

  /// "file:line:column: where: field: what", leaving out the parts that are empty.
  std::string text() const;
};

using problem_list = std::vector<problem>;

/// A problem of a whole file (no field, no place in it): "file: what".
problem file_problem(std::string file, std::string what, unsigned line = 0, unsigned column = 0);
/// A problem at a place in a file: "file: where: what".
problem place_problem(std::string file, std::string where, std::string what);

/// `p` seen from the struct that holds it: its field path gains `outer` in front ("retry" and
/// "limit" give "retry.limit"; an empty field becomes `outer`).
problem within(const std::string& outer, problem p);
/// Every problem of `ps` within `outer`, appended to `out`.
void add_within(problem_list& out, const std::string& outer, const problem_list& ps);

/// A loader's refusal of an input, keeping the located problem: bad input (std::invalid_argument,
/// the error model's class) whose what() is the problem's text.
class problem_error : public std::invalid_argument {
 public:
  explicit problem_error(problem p) : std::invalid_argument(p.text()), problem_(std::move(p)) {}
  const problem& get() const { return problem_; }

 private:
  problem problem_;
};

/// The problem a loader's exception describes, about `field` (a problem_error's own problem, its
/// field within `field`).
problem problem_of(const std::string& field, const std::exception& e);

/// One problem per line, as the command line prints them.
std::string to_text(const problem_list& ps);

}  // namespace milesrt
