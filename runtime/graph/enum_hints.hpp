#pragma once
/// Enum values in words: the list a user may write, for the errors of graph files and `--set`.

#include <capnp/schema.h>

#include <cstdint>
#include <string>

namespace milesrt::graph {

/// The enumerants of `e` as a graph file writes them: "cpu, cuda".
std::string enumerant_list(capnp::EnumSchema e);

/// What to add to a Cap'n Proto compiler error about an enum value in a graph file, so that it
/// lists the values the field takes; "" when the error is not about an enum field.
///   "Type mismatch; expected Device."  (a quoted value)  -> " Device is one of: cpu, cuda (written
///                                                            without quotes)"
///   "Not defined: tpu"  at `device = tpu`              -> " (device is one of: cpu, cuda)"
/// The enums are those of the fields reachable from `root` (structs, groups, unions, lists of
/// structs); the field is the name before the `=` that precedes `offset` in `source`.
std::string enum_hint(capnp::StructSchema root, const std::string& message,
                      const std::string& source, size_t offset);

/// The offset of 0-based `line` and `column` in `source` (its size when past the end).
size_t offset_of(const std::string& source, uint32_t line, uint32_t column);

}  // namespace milesrt::graph
