#pragma once
/// Two members of one union set in a graph file's text, `schedule = (sync = void, async = (...))`:
/// Cap'n Proto's compiler keeps the last one and says nothing, so the graph would run with a
/// schedule its author did not mean. The check reads the text of the `graph` constant beside its
/// schema (struct literals, lists, groups) and names the union and both fields.

#include <capnp/schema.h>

#include <string>
#include <vector>

#include "runtime/core/problem.hpp"

namespace milesrt::graph {

/// One problem per struct literal in the value of `const graph :T = (...)` in `text` that sets
/// two members of one union of `root` (or of a struct or group inside it), located in file
/// `name` at the second member: "NAME:LINE:COL: PATH: 'a' and 'b' are members of one union; set
/// one of them". `text` must be a file the compiler accepted; values it cannot follow (a
/// constant's name) are skipped.
problem_list union_conflicts(const std::string& text, const std::string& name,
                             capnp::StructSchema root);

/// A field the `graph` constant's value names: `name = value` in a struct literal.
struct field_use {
  size_t offset = 0;  ///< where the name starts in the text
  std::string name;   ///< as written
  std::string in;  ///< the struct or group it is written in: "EnvironmentParams", "Schedule.Async"
  bool known = false;  ///< that struct has a field of this name
};

/// Every field named in the value of `const graph :T = (...)` in `text`, in the order written,
/// with the struct of `root` (or inside it) each belongs to. Comments and strings are not read;
/// the fields of a value the walk cannot follow (an unknown field's) are not listed.
std::vector<field_use> field_uses(const std::string& text, capnp::StructSchema root);

}  // namespace milesrt::graph
