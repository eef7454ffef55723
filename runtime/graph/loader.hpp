#pragma once
/// Reading graph files: Cap'n Proto text parsed at run time with capnp::SchemaParser.

#include <capnp/message.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "milesrt/graph.capnp.h"
#include "runtime/core/problem.hpp"

namespace milesrt::graph {

/// A graph file read into memory. Owns its message, so the reader stays valid as long as this does.
class loaded_graph {
 public:
  loaded_graph(std::filesystem::path file, std::unique_ptr<capnp::MallocMessageBuilder> message);

  /// The graph as written in the file (after overrides, once those exist).
  schema::Graph::Reader reader() const;
  /// Mutable access, for `--set` overrides applied before validation.
  schema::Graph::Builder builder();
  /// The file the graph came from, as given on the command line.
  const std::filesystem::path& file() const { return file_; }
  /// The underlying message (to send the graph to a worker process as a flat array).
  capnp::MallocMessageBuilder& message() { return *message_; }

  /// A graph received as a flat Cap'n Proto message (a worker's copy); `file` names its origin.
  static std::unique_ptr<loaded_graph> from_flat(std::filesystem::path file,
                                                 const std::vector<uint8_t>& bytes);

 private:
  std::filesystem::path file_;
  std::unique_ptr<capnp::MallocMessageBuilder> message_;
};

/// A field a graph file may no longer name: renamed, or removed. The app that registers the kinds
/// keeps the table (its schemas' renames); the loader turns the compiler's "no field named X" into
/// "field X was renamed Y", and `milesrt upgrade` rewrites the old names.
struct renamed_field {
  std::string in;    ///< the struct, as its schema declares it: "EnvironmentParams"
  std::string from;  ///< the old name
  std::string to;    ///< the new name; "" when the field was removed
  std::string hint;  ///< for a removed field: what to write instead
};

/// The entry of `table` for field `name` written in struct `in`, or null.
const renamed_field* find_rename(const std::vector<renamed_field>& table, const std::string& in,
                                 const std::string& name);

/// "field X was renamed Y (`milesrt upgrade FILE` rewrites the file)" (without the parenthesis
/// when `file` is empty: a `--set`), or for a removed field "field X was removed: HINT".
std::string rename_message(const renamed_field& r, const std::string& file);

/// Where absolute imports ("/milesrt/graph.capnp", "/capnp/c++.capnp") are looked up.
/// Defaults: $MILESRT_SCHEMA_PATH (colon-separated), then the build's schema folder, then
/// Cap'n Proto's own include folder.
std::vector<std::filesystem::path> default_import_dirs();

/// Result of load_graph: a graph, or the problems that prevented reading it.
struct load_result {
  std::unique_ptr<loaded_graph> graph;
  problem_list errors;
  bool ok() const { return graph != nullptr && errors.empty(); }
};

/// Parses `file`, which must declare `const graph :Graph`. Never throws for bad input: every
/// problem (missing file, syntax or type error, no or wrongly typed `graph` constant) comes back
/// as a problem naming the file, and line and column where the parser knows them. A field
/// `renames` lists is reported with rename_message.
load_result load_graph(const std::filesystem::path& file,
                       const std::vector<std::filesystem::path>& import_dirs,
                       const std::vector<renamed_field>& renames = {});

}  // namespace milesrt::graph
