#pragma once
/// Two members of one union set in a graph file's text, `schedule = (sync = void, async = (...))`:
/// Cap'n Proto's compiler keeps the last one and says nothing, so the graph would run with a
/// schedule its author did not mean. The check reads the text of the `graph` constant beside its
/// schema (struct literals, lists, groups) and names the union and both fields.

#include <capnp/schema.h>

#include <string>
#include <vector>

namespace milesrt::graph {

/// One message per struct literal in the value of `const graph :T = (...)` in `text` that sets
/// two members of one union of `root` (or of a struct or group inside it):
/// "NAME:LINE:COL: PATH: 'a' and 'b' are members of one union; set one of them". `text` must
/// be a file the compiler accepted; values it cannot follow (a constant's name) are skipped.
std::vector<std::string> union_conflicts(const std::string& text, const std::string& name,
                                         capnp::StructSchema root);

}  // namespace milesrt::graph
