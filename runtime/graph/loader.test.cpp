#include "runtime/graph/loader.hpp"

#include <gtest/gtest.h>

#include <fstream>

#include "runtime/graph/dot.hpp"
#include "runtime/graph/union_check.hpp"
#include "runtime/graph/validate.hpp"

namespace milesrt::graph {
namespace {
namespace fs = std::filesystem;

class GraphLoader : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("milesrt-loader-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const std::string& text) {
    fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p;
  }

  static std::string all(const load_result& r) {
    std::string s;
    for (const auto& d : r.errors) s += d.text() + "\n";
    return s;
  }

  fs::path dir_;
};

constexpr const char* kHeader =
    "@0xb1c2d3e4f5a6b7c8;\nusing import \"/milesrt/graph.capnp\".Graph;\n";

// Two members of one union set: Cap'n Proto's compiler keeps the last and says nothing, so
// `schedule = (sync = void, async = ...)` would run async. Refused with file:line:col naming the
// union and both fields, wherever the union is (the schedule, an actor's params in a list);
// comments and strings that look like fields are not read as fields.
TEST_F(GraphLoader, TwoMembersOfOneUnionAreRefused) {
  auto file = write("two.capnp", std::string(kHeader) + R"g(
const graph :Graph = (
  name = "two, (sync = void, async = 1)",  # schedule = (sync = void, async = ...)
  actors = [(name = "src", kind = "source"),
            (name = "dst", kind = "sink", params = (none = void, custom = []))],
  edges = [(from = "src.out", to = "dst.in")],
  schedule = (sync = void, async = (maxStaleness = 1)),
  run = (steps = 5));
)g");
  auto r = load_graph(file, default_import_dirs());
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(r.errors.size(), 2u) << all(r);
  EXPECT_EQ(r.errors[0].text(),
            file.string() +
                ":7:66: actors[1].params: 'none' and 'custom' are members of one "
                "union (Cap'n Proto would keep only the last); set one of them");
  EXPECT_EQ(r.errors[1].text(), file.string() +
                                    ":9:28: schedule: 'sync' and 'async' are members of one union "
                                    "(Cap'n Proto would keep only the last); set one of them");
  // One member, set twice or alone, is fine.
  file = write("one.capnp", std::string(kHeader) + R"(
const graph :Graph = (
  actors = [(name = "src", kind = "source", params = (none = void))],
  schedule = (async = (maxStaleness = 1, onStale = drop)),
  run = (steps = 5));
)");
  r = load_graph(file, default_import_dirs());
  EXPECT_TRUE(r.ok()) << all(r);
}

TEST_F(GraphLoader, ReadsAWellFormedGraph) {
  auto file = write("ok.capnp", std::string(kHeader) + R"(
const graph :Graph = (
  name = "two",
  actors = [(name = "src", kind = "source"), (name = "dst", kind = "sink", replicas = 2)],
  edges = [(from = "src.out", to = "dst.in", capacity = 4)],
  schedule = (async = (maxStaleness = 2, onStale = drop)),
  run = (steps = 5, seed = 7));
)");
  auto r = load_graph(file, default_import_dirs());
  ASSERT_TRUE(r.ok()) << all(r);
  auto g = r.graph->reader();
  EXPECT_EQ(std::string(g.getName()), "two");
  ASSERT_EQ(g.getActors().size(), 2u);
  EXPECT_EQ(g.getActors()[1].getReplicas(), 2u);
  EXPECT_TRUE(g.getSchedule().isAsync());
  EXPECT_EQ(g.getSchedule().getAsync().getMaxStaleness(), 2u);
  EXPECT_EQ(g.getRun().getSteps(), 5u);
  EXPECT_EQ(std::string(g.getRun().getDir()), "runs/latest");  // schema default
  EXPECT_TRUE(validate_structure(*r.graph).empty());
  auto dot = to_dot(*r.graph);
  EXPECT_NE(dot.find("\"src\" -> \"dst\" [label=\"out -> in\"]"), std::string::npos) << dot;
}

TEST_F(GraphLoader, SyntaxErrorHasOneBasedLineAndColumn) {
  // The unknown field starts on line 4, column 23 (both 1-based, as `capnp compile` prints them).
  auto file = write("bad.capnp", std::string(kHeader) + "\nconst graph :Graph = (actorz = []);\n");
  auto r = load_graph(file, default_import_dirs());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(all(r).find(file.string() + ":4:23: Struct has no field named 'actorz'"),
            std::string::npos)
      << all(r);
  auto syntax = load_graph(write("syntax.capnp", std::string(kHeader) + "\nconst graph %:Graph;\n"),
                           default_import_dirs());
  ASSERT_FALSE(syntax.ok());
  EXPECT_NE(all(syntax).find("syntax.capnp:4:"), std::string::npos) << all(syntax);
}

TEST_F(GraphLoader, TypeErrorNamesTheField) {
  auto file =
      write("type.capnp", std::string(kHeader) + "const graph :Graph = (actors = [(name = 3)]);\n");
  auto r = load_graph(file, default_import_dirs());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(all(r).find(file.string() + ":3:"), std::string::npos) << all(r);
}

TEST_F(GraphLoader, AWrongEnumValueListsTheValues) {
  // The compiler names neither the field nor its values; the loader adds them.
  auto file =
      write("enum.capnp", std::string(kHeader) +
                              "const graph :Graph = (schedule = (async = (onStale = dorp)));\n");
  auto r = load_graph(file, default_import_dirs());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(all(r), file.string() + ":3:54: Not defined: dorp (onStale is one of: wait, drop)\n");
  auto quoted = write(
      "quoted.capnp",
      std::string(kHeader) + "const graph :Graph = (schedule = (async = (onStale = \"drop\")));\n");
  r = load_graph(quoted, default_import_dirs());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(all(r), quoted.string() +
                        ":3:54: Type mismatch; expected OnStale. OnStale is one of: wait, drop "
                        "(written without quotes)\n");
  // Not an enum field: the compiler's message alone.
  auto other =
      write("other.capnp", std::string(kHeader) + "const graph :Graph = (name = nothing);\n");
  r = load_graph(other, default_import_dirs());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(all(r), other.string() + ":3:30: Not defined: nothing\n");
}

TEST_F(GraphLoader, UnknownFieldIsAnError) {
  auto file = write("field.capnp", std::string(kHeader) + "const graph :Graph = (actorz = []);\n");
  auto r = load_graph(file, default_import_dirs());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(all(r).find("actorz"), std::string::npos) << all(r);
}

// A field the rename table lists is refused with its new name, where it is written; the same name
// in another struct, in a comment or in a string is not taken for it.
TEST_F(GraphLoader, ARenamedFieldIsRefusedWithItsNewName) {
  const std::vector<renamed_field> table = {{"Run", "stepz", "steps", ""},
                                            {"Schedule.Async", "whenLate", "", "write onStale"}};
  auto file = write("renamed.capnp", std::string(kHeader) + R"g(
const graph :Graph = (
  name = "stepz = 1",  # stepz = 2
  actors = [(name = "src", kind = "source")],
  schedule = (async = (whenLate = wait)),
  run = (stepz = 5));
)g");
  auto r = load_graph(file, default_import_dirs(), table);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.errors.size(), 2u) << all(r);
  EXPECT_NE(all(r).find(file.string() + ":7:24: field whenLate was removed: write onStale\n"),
            std::string::npos)
      << all(r);
  EXPECT_NE(all(r).find(file.string() + ":8:10: field stepz was renamed steps (`milesrt upgrade " +
                        file.string() + "` rewrites the file)\n"),
            std::string::npos)
      << all(r);
  // Without the table: the compiler's own words.
  r = load_graph(file, default_import_dirs());
  EXPECT_NE(all(r).find("Struct has no field named 'stepz'"), std::string::npos) << all(r);
  // Elsewhere the name is not the renamed field: the compiler's words.
  auto other = write("other.capnp",
                     std::string(kHeader) + "const graph :Graph = (name = \"x\", stepz = 1);\n");
  r = load_graph(other, default_import_dirs(), table);
  EXPECT_NE(all(r).find("Struct has no field named 'stepz'"), std::string::npos) << all(r);
}

TEST_F(GraphLoader, FieldUsesNameTheStructOfEachField) {
  const std::string text = std::string(kHeader) +
                           "const graph :Graph = (name = \"a = (\",  # b = 1\n"
                           "  schedule = (async = (maxStaleness = 2)), run = (stepz = 5));\n";
  std::string seen;
  for (const auto& u : field_uses(text, capnp::Schema::from<schema::Graph>())) {
    seen += u.in + "." + u.name + (u.known ? "" : "?") + " ";
    EXPECT_EQ(text.substr(u.offset, u.name.size()), u.name);
  }
  EXPECT_EQ(seen,
            "Graph.name Graph.schedule Schedule.async Schedule.Async.maxStaleness Graph.run "
            "Run.stepz? ");
}

TEST_F(GraphLoader, MissingFileIsNamed) {
  auto r = load_graph(dir_ / "nope.capnp", default_import_dirs());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(all(r).find("nope.capnp: no such graph file"), std::string::npos) << all(r);
}

TEST_F(GraphLoader, MissingGraphConstant) {
  auto file = write("noconst.capnp", std::string(kHeader) + "const other :Graph = ();\n");
  auto r = load_graph(file, default_import_dirs());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(all(r).find("declares no `const graph :Graph"), std::string::npos) << all(r);
}

TEST_F(GraphLoader, GraphConstantOfTheWrongType) {
  auto file = write("wrongtype.capnp", std::string(kHeader) + "const graph :Text = \"x\";\n");
  auto r = load_graph(file, default_import_dirs());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(all(r).find("must have type Graph"), std::string::npos) << all(r);
}

TEST_F(GraphLoader, MissingImportIsAnError) {
  auto file =
      write("import.capnp", "@0xb1c2d3e4f5a6b7c9;\nusing import \"/milesrt/nope.capnp\".X;\n");
  auto r = load_graph(file, default_import_dirs());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(all(r).find(file.string() + ":2:"), std::string::npos) << all(r);
}

TEST_F(GraphLoader, StructuralErrorsNameActorAndField) {
  auto file = write("struct.capnp", std::string(kHeader) + R"(
const graph :Graph = (
  actors = [(name = "a", kind = "k"), (name = "a", kind = "k"), (name = "b", kind = "", replicas = 0)],
  edges = [(from = "a.out", to = "c.in"), (from = "a", to = "b.in"),
           (from = "a.x", to = "b.y"), (from = "a.x", to = "b.y")],
  run = (steps = 0));
)");
  auto r = load_graph(file, default_import_dirs());
  ASSERT_TRUE(r.ok()) << all(r);
  std::string s;
  for (const auto& d : validate_structure(*r.graph)) s += d.text() + "\n";
  const std::string f = file.string() + ": ";
  EXPECT_NE(s.find(f + "actor 'a': field 'name': duplicate actor name (also actors[0])"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find(f + "actor 'b': field 'kind': must not be empty"), std::string::npos) << s;
  EXPECT_NE(s.find(f + "actor 'b': field 'replicas': must be at least 1"), std::string::npos) << s;
  EXPECT_NE(s.find("edge 0 (a.out -> c.in): field 'to': no actor named 'c'"), std::string::npos)
      << s;
  EXPECT_NE(s.find("edge 1 (a -> b.in): field 'from': expected \"actor.port\""), std::string::npos)
      << s;
  EXPECT_NE(s.find("edge 3 (a.x -> b.y): duplicate edge"), std::string::npos) << s;
  EXPECT_NE(s.find(f + "run: field 'steps': must be at least 1"), std::string::npos) << s;
}

/// Every structural problem of a graph with `run` as its run section (and `schedule`).
std::string run_problems(const fs::path& file, const std::string& run,
                         const std::string& schedule = "(sync = void)") {
  std::ofstream(file) << kHeader
                      << "const graph :Graph = (actors = [(name = \"a\", kind = \"k\")],\n"
                      << "  schedule = " << schedule << ", run = " << run << ");\n";
  auto r = load_graph(file, default_import_dirs());
  if (!r.ok()) return "<load failed>";
  std::string s;
  for (const auto& d : validate_structure(*r.graph)) s += d.text() + "\n";
  return s;
}

// Durations that are not finite, not positive or too large for the millisecond conversion are
// refused by validation, naming the field and the limit.
TEST_F(GraphLoader, DurationsMustBeFinitePositiveAndBounded) {
  const auto file = dir_ / "durations.capnp";
  const std::string bound = "must be above 0 and at most 1e+07 seconds (finite)";
  for (const std::string v : {"1e300", "nan", "inf", "0", "-1"}) {
    for (const std::string field :
         {"deadlineSeconds", "workerWaitSeconds", "restartWindowSeconds"}) {
      auto s = run_problems(file, "(" + field + " = " + v + ")");
      EXPECT_EQ(s, file.string() + ": run: field '" + field + "': " + bound + "\n")
          << field << " = " << v;
    }
    // A grace of 0 is allowed: a lost worker then ends the run at once.
    auto s = run_problems(file, "(workerGraceSeconds = " + v + ")");
    EXPECT_EQ(s, v == "0" ? ""
                          : file.string() +
                                ": run: field 'workerGraceSeconds': must be between 0 and at most "
                                "1e+07 seconds (finite)\n")
        << v;
  }
  EXPECT_EQ(run_problems(file, "(deadlineSeconds = 1e7, workerWaitSeconds = 0.5)"), "");
}

// Work without bound: a batch, a staleness window or a number of steps beyond the limits.
TEST_F(GraphLoader, BatchSizeStalenessWindowAndStepsAreBounded) {
  const auto file = dir_ / "work.capnp";
  const std::string f = file.string() + ": ";
  EXPECT_EQ(run_problems(file, "(batchSize = 4000000000)"),
            f + "run: field 'batchSize': at most 100000\n");
  EXPECT_EQ(run_problems(file, "(batchSize = 4)", "(async = (maxStaleness = 4294967295))"),
            f + "schedule: field 'async.maxStaleness': (maxStaleness + 1) x batchSize is "
                "17179869184 items, "
                "at most 1000000\n");
  EXPECT_EQ(run_problems(file, "(steps = 4000000000)"),
            f + "run: field 'steps': at most 100000000\n");
  EXPECT_EQ(
      run_problems(file, "(batchSize = 1000, steps = 100000000)", "(async = (maxStaleness = 999))"),
      "");
}

// Names of 50,000 characters are refused by their length (a std::regex over them overflowed the
// stack), and so are edge endpoints.
TEST_F(GraphLoader, LongNamesAndEndpointsAreRefusedByLength) {
  const std::string longname(50000, 'a');
  auto file =
      write("long.capnp", std::string(kHeader) + "const graph :Graph = (actors = [(name = \"" +
                              longname + "\", kind = \"k\")], edges = [(from = \"" + longname +
                              ".x\", to = \"b." + longname + "\")]);\n");
  auto r = load_graph(file, default_import_dirs());
  ASSERT_TRUE(r.ok()) << all(r);
  std::string s;
  for (const auto& d : validate_structure(*r.graph)) s += d.text() + "\n";
  const std::string f = file.string() + ": ";
  EXPECT_EQ(s, f + "actors[0]: field 'name': longer than 128 characters (50000)\n" + f +
                   "edge 0: field 'from': longer than 257 characters (50002)\n" + f +
                   "edge 0: field 'to': longer than 257 characters (50002)\n");
  // A name of the limit's length, and a bad character, are told apart.
  endpoint ep;
  EXPECT_TRUE(parse_endpoint(std::string(128, 'x') + ".y", ep));
  EXPECT_FALSE(parse_endpoint("a.b.c", ep));
  EXPECT_FALSE(parse_endpoint("1a.b", ep));
  EXPECT_FALSE(parse_endpoint("a.", ep));
}

// Brackets nested 3,000 deep are refused before the Cap'n Proto compiler (which recursed on them
// until the stack overflowed); brackets inside strings and comments do not count.
TEST_F(GraphLoader, DeepNestingIsRefusedBeforeTheCompiler) {
  auto file =
      write("deep.capnp", std::string(kHeader) +
                              "const graph :Graph = (name = \"((((\", # [[[[\n  description = " +
                              std::string(3000, '(') + "\"x\"" + std::string(3000, ')') + ");\n");
  auto r = load_graph(file, default_import_dirs());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(all(r), file.string() + ": line 4: brackets nested deeper than 64 levels\n");
  auto ok = write("ok.capnp", std::string(kHeader) + "const graph :Graph = (name = \"" +
                                  std::string(100, '(') + "\", # " + std::string(100, '[') +
                                  "\n  actors = [(name = \"a\", kind = \"k\")]);\n");
  auto r2 = load_graph(ok, default_import_dirs());
  EXPECT_TRUE(r2.ok()) << all(r2);
}

}  // namespace
}  // namespace milesrt::graph
