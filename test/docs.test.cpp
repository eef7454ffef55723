// The documentation checks itself against the code: every field of every struct in schemas/*.capnp
// (read from the compiled schemas, from the graph's root down through the kinds' params) is named
// in docs/graph-files.md; every option of every subcommand (read from `milesrt <cmd> --help`) is
// listed in docs/commands.md's table, in its subcommand's row; every path in architecture.md's
// feature index exists.

#include <capnp/schema.h>
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "milesrt/graph.capnp.h"
#include "test/support.hpp"

namespace {
using namespace milesrt::testing;

/// `name` appears in `doc` as code: a backtick, the name, then no further identifier character
/// ("`async = (...)`" names `async`).
bool names(const std::string& doc, const std::string& name) {
  const std::string quoted = "`" + name;
  for (size_t at = doc.find(quoted); at != std::string::npos; at = doc.find(quoted, at + 1)) {
    const size_t end = at + quoted.size();
    if (end >= doc.size() ||
        !(std::isalnum(static_cast<unsigned char>(doc[end])) || doc[end] == '_'))
      return true;
  }
  return false;
}

/// "Struct.field" of every field reachable from `s` (groups, union members, lists of structs).
void fields(capnp::StructSchema s, std::set<uint64_t>& seen,
            std::vector<std::pair<std::string, std::string>>& out) {
  if (!seen.insert(s.getProto().getId()).second) return;
  const std::string display = s.getProto().getDisplayName().cStr();
  const std::string name = display.substr(display.find(':') + 1);
  for (auto f : s.getFields()) {
    out.emplace_back(name, f.getProto().getName().cStr());
    auto type = f.getType();
    while (type.isList()) type = type.asList().getElementType();
    if (type.isStruct()) fields(type.asStruct(), seen, out);
  }
}

TEST(Docs, EverySchemaFieldIsInGraphFiles) {
  const std::string doc = slurp(fs::path(source_dir()) / "docs" / "graph-files.md");
  std::set<uint64_t> seen;
  std::vector<std::pair<std::string, std::string>> all;
  fields(capnp::Schema::from<milesrt::schema::Graph>(), seen, all);
  EXPECT_GE(all.size(), 150u) << "the walk should reach every kind's params";
  std::set<std::string> structs;
  for (const auto& [in, field] : all) {
    structs.insert(in);
    EXPECT_TRUE(names(doc, field)) << in << "." << field << " is not in docs/graph-files.md";
  }
  for (const char* s : {"Graph", "Run", "Schedule.Async", "TrainerParams", "RolloutParams", "Lora",
                        "EnvironmentParams", "SessionServerParams", "Param"})
    EXPECT_TRUE(structs.count(s)) << s << " was not reached";
}

TEST(Docs, TheFieldCheckReadsCodeNames) {
  EXPECT_TRUE(names("| `maxRestarts` | UInt32 |", "maxRestarts"));
  EXPECT_TRUE(names("`async = (maxStaleness = 1)`", "async"));
  EXPECT_FALSE(names("`maxRestartsX`", "maxRestarts"));
  EXPECT_FALSE(names("maxRestarts without backticks", "maxRestarts"));
}

/// The subcommands and options of `milesrt ARGS --help`.
struct help_text {
  std::vector<std::string> subcommands, options;
};

help_text help(const std::string& args) {
  auto r = run_milesrt(args + " --help", "docs-help");
  EXPECT_EQ(r.status, 0) << args << ": " << r.err;
  help_text h;
  const size_t subs = r.out.find("\nSubcommands:\n");
  const std::string options = r.out.substr(0, subs);
  static const std::regex option(R"(\n\s+(?:-\w,)?(--[\w-]+))"), sub(R"(\n  (\w[\w-]*)\s)");
  for (std::sregex_iterator it(options.begin(), options.end(), option), end; it != end; ++it)
    if ((*it)[1] != "--help") h.options.push_back((*it)[1]);
  if (subs != std::string::npos) {
    const std::string rest = r.out.substr(subs);
    for (std::sregex_iterator it(rest.begin(), rest.end(), sub), end; it != end; ++it)
      h.subcommands.push_back((*it)[1]);
  }
  return h;
}

/// The row of commands.md's options table for `milesrt PATH`, or "".
std::string row_of(const std::string& doc, const std::string& path) {
  const std::string start = "| `milesrt " + path + "` |";
  const size_t at = doc.find(start);
  if (at == std::string::npos) return "";
  return doc.substr(at, doc.find('\n', at) - at);
}

TEST(Docs, EverySubcommandOptionIsInCommands) {
  const std::string doc = slurp(fs::path(source_dir()) / "docs" / "commands.md");
  std::vector<std::string> todo;
  for (const auto& s : help("").subcommands) todo.push_back(s);
  ASSERT_GE(todo.size(), 10u);
  int rows = 0;
  while (!todo.empty()) {
    const std::string path = todo.back();
    todo.pop_back();
    const auto h = help(path);
    for (const auto& s : h.subcommands) todo.push_back(path + " " + s);
    if (!h.subcommands.empty()) continue;  // a group of subcommands: its members have the rows
    const std::string row = row_of(doc, path);
    ++rows;
    if (row.empty()) {
      ADD_FAILURE() << "docs/commands.md has no row `milesrt " << path << "` in its options table";
      continue;
    }
    for (const auto& o : h.options) {
      // What every subcommand takes is said once, in the line above the table.
      if (o == "--log-level" || o == "--log-format") {
        EXPECT_TRUE(names(doc, o)) << o << " is not in docs/commands.md";
        continue;
      }
      EXPECT_TRUE(names(row, o)) << "milesrt " << path << " " << o
                                 << " is not in its row of docs/commands.md";
    }
  }
  EXPECT_GE(rows, 15);
}

TEST(Docs, EveryPathOfTheFeatureIndexExists) {
  const fs::path src = source_dir();
  const std::string doc = slurp(src / "docs" / "architecture.md");
  const size_t at = doc.find("## Where each feature lives");
  ASSERT_NE(at, std::string::npos);
  const std::string index = doc.substr(at);
  static const std::regex path(
      R"(`((?:actors|runtime|app|kernels|graphs|schemas|examples|test)/[^`\s]*)`)");
  int n = 0;
  for (std::sregex_iterator it(index.begin(), index.end(), path), end; it != end; ++it, ++n)
    EXPECT_TRUE(fs::exists(src / (*it)[1].str())) << (*it)[1] << " (docs/architecture.md)";
  EXPECT_GE(n, 30);
}

}  // namespace
