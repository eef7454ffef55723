#include "runtime/core/problem.hpp"

#include <utility>

namespace milesrt {

std::string problem::text() const {
  std::string out = file;
  if (!out.empty() && line > 0) {
    out += ':' + std::to_string(line);
    if (column > 0) out += ':' + std::to_string(column);
  }
  for (const std::string* part : {&where, &field}) {
    if (part->empty()) continue;
    out += (out.empty() ? "" : ": ") + *part;
  }
  return out.empty() ? what : out + ": " + what;
}

problem file_problem(std::string file, std::string what, unsigned line, unsigned column) {
  problem p{"", std::move(what)};
  p.file = std::move(file);
  p.line = line;
  p.column = column;
  return p;
}

problem place_problem(std::string file, std::string where, std::string what) {
  problem p{"", std::move(what)};
  p.file = std::move(file);
  p.where = std::move(where);
  return p;
}

problem within(const std::string& outer, problem p) {
  if (outer.empty()) return p;
  p.field = p.field.empty() ? outer : outer + "." + p.field;
  return p;
}

void add_within(problem_list& out, const std::string& outer, const problem_list& ps) {
  for (const auto& p : ps) out.push_back(within(outer, p));
}

problem problem_of(const std::string& field, const std::exception& e) {
  if (const auto* p = dynamic_cast<const problem_error*>(&e)) return within(field, p->get());
  return {field, e.what()};
}

std::string to_text(const problem_list& ps) {
  std::string out;
  for (const auto& p : ps) out += (out.empty() ? "" : "\n") + p.text();
  return out;
}

}  // namespace milesrt
