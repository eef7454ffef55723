// The house rules (docs/architecture.md), checked on the source tree: which folder may include
// which, no LLM word in runtime/, and no room doing three jobs (files of at most 800 lines,
// functions of at most 120, in runtime/, actors/ and app/, tests and generated code aside).
// A failure names the file, the line and the rule it breaks.
//
//   runtime/            includes runtime/ and its own schema (milesrt/graph.capnp.h) only, and
//                       names no LLM concept and no built-in kind
//   kernels/            a leaf: includes kernels/ only
//   actors/lib/<L>/     includes runtime/, kernels/, schemas and the libraries below L (kLibBelow)
//   actors/<kind>/      includes runtime/, kernels/, schemas, actors/lib/ and its own folder —
//                       never a sibling kind
//   app/                the top floor: anything
//   examples/, test/    anything public, but never app/
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {
namespace fs = std::filesystem;

const fs::path root = MILESRT_SOURCE_DIR;

/// The shared libraries and the libraries each may include (downward only; its own folder too).
const std::map<std::string, std::set<std::string>> kLibBelow = {
    {"llm", {}},          {"tasks", {}},        {"rl", {"llm"}},
    {"serving", {"llm"}}, {"weights", {"llm"}}, {"eval", {"llm", "serving", "tasks"}},
    {"agent", {"llm"}},   {"dist", {}},
};

/// Schemas the runtime owns (the rest belong to the kinds).
const std::set<std::string> kRuntimeSchemas = {"milesrt/graph.capnp.h", "milesrt/param.capnp.h",
                                               "milesrt/tensorboard/event.pb.h"};

struct include_line {
  fs::path file;  ///< relative to the source root
  int line = 0;
  std::string target;  ///< what is between the quotes
};

bool is_source(const fs::path& p) {
  const auto e = p.extension().string();
  return e == ".cpp" || e == ".hpp" || e == ".cu" || e == ".cuh" || e == ".h";
}

std::vector<fs::path> sources_under(const std::string& folder) {
  std::vector<fs::path> out;
  if (!fs::exists(root / folder)) return out;
  for (const auto& e : fs::recursive_directory_iterator(root / folder)) {
    if (e.is_regular_file() && is_source(e.path())) out.push_back(fs::relative(e.path(), root));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<include_line> quoted_includes(const fs::path& rel) {
  static const std::regex inc(R"re(^\s*#\s*include\s*"([^"]+)")re");
  std::vector<include_line> out;
  std::ifstream in(root / rel);
  std::string text;
  int n = 0;
  while (std::getline(in, text)) {
    ++n;
    std::smatch m;
    if (std::regex_search(text, m, inc)) out.push_back({rel, n, m[1]});
  }
  return out;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

std::string where(const include_line& i) {
  return i.file.string() + ":" + std::to_string(i.line) + ": #include \"" + i.target + "\"";
}

/// The first folder of a path under actors/: a kind name, or "lib/<name>".
std::string actor_folder(const std::string& path_under_actors) {
  auto slash = path_under_actors.find('/');
  std::string first = path_under_actors.substr(0, slash);
  if (first != "lib" || slash == std::string::npos) return first;
  auto rest = path_under_actors.substr(slash + 1);
  return "lib/" + rest.substr(0, rest.find('/'));
}

/// Returns what is wrong with one include, or "".
std::string judge(const include_line& i) {
  const std::string file = i.file.generic_string();
  const std::string& t = i.target;
  const bool schema = starts_with(t, "milesrt/") && t.find(".capnp.h") != std::string::npos;
  if (starts_with(file, "runtime/")) {
    if (starts_with(t, "runtime/") || kRuntimeSchemas.count(t)) return "";
    return "runtime/ includes only runtime/ and its own schema (it is the floor under everything)";
  }
  if (starts_with(file, "kernels/")) {
    if (starts_with(t, "kernels/")) return "";
    return "kernels/ is a leaf: it includes only kernels/";
  }
  if (starts_with(file, "actors/")) {
    const std::string me = actor_folder(file.substr(7));
    if (starts_with(t, "runtime/") || starts_with(t, "kernels/") || schema) return "";
    if (!starts_with(t, "actors/"))
      return "actors/ includes runtime/, kernels/, schemas and actors/lib/ only";
    const std::string it = actor_folder(t.substr(7));
    if (it == me) return "";
    if (starts_with(me, "lib/")) {
      const std::string lib = me.substr(4);
      auto below = kLibBelow.find(lib);
      if (below == kLibBelow.end())
        return "actors/" + me + " is not a library this test knows (add it to kLibBelow)";
      if (starts_with(it, "lib/") && below->second.count(it.substr(4))) return "";
      return "library " + me + " may include only the libraries below it, not actors/" + it;
    }
    if (starts_with(it, "lib/")) return "";
    return "kind '" + me + "' includes sibling kind '" + it +
           "' (move what they share into actors/lib/)";
  }
  if (starts_with(file, "examples/") || starts_with(file, "test/") ||
      starts_with(file, "graphs/")) {
    if (starts_with(t, "app/")) return "only app/ includes app/";
  }
  return "";
}

TEST(House, EveryIncludeFollowsTheFloors) {
  std::vector<std::string> problems;
  for (const char* folder : {"runtime", "kernels", "actors", "examples", "test"}) {
    for (const auto& f : sources_under(folder)) {
      for (const auto& i : quoted_includes(f)) {
        auto why = judge(i);
        if (!why.empty()) problems.push_back(where(i) + "  <- " + why);
      }
    }
  }
  std::string all;
  for (const auto& p : problems) all += p + "\n";
  EXPECT_TRUE(problems.empty()) << problems.size() << " include(s) break the house rules:\n" << all;
}

TEST(House, TheRulesCatchWhatTheyForbid) {
  // The judge itself, on made-up lines: each forbidden include must be caught.
  auto bad = [](const std::string& file, const std::string& target) {
    return !judge({file, 1, target}).empty();
  };
  EXPECT_TRUE(bad("runtime/driver/driver.cpp", "actors/lib/llm/model.hpp"));
  EXPECT_TRUE(bad("runtime/cli/main.cpp", "app/builtin_kinds.hpp"));
  EXPECT_TRUE(bad("runtime/testing/x.hpp", "examples/toy/toy_kinds.hpp"));
  EXPECT_TRUE(bad("runtime/graph/loader.hpp", "milesrt/rollout.capnp.h"));
  EXPECT_TRUE(bad("kernels/rmsnorm/rmsnorm.cu", "runtime/core/kind.hpp"));
  EXPECT_TRUE(bad("actors/trainer/trainer_kind.cpp", "actors/rollout/rollout_kind.hpp"));
  EXPECT_TRUE(bad("actors/critic/critic_core.hpp", "actors/trainer/trainer_core.hpp"));
  EXPECT_TRUE(bad("actors/lib/llm/model.cpp", "actors/lib/serving/engine.hpp"));
  EXPECT_TRUE(bad("actors/lib/weights/apply.cpp", "actors/publisher/publisher_kind.hpp"));
  EXPECT_TRUE(bad("actors/reward/reward_kinds.cpp", "app/commands.hpp"));
  EXPECT_TRUE(bad("examples/toy/plugin.cpp", "app/builtin_kinds.hpp"));
  EXPECT_FALSE(bad("actors/trainer/trainer_kind.cpp", "actors/lib/rl/losses.hpp"));
  EXPECT_FALSE(bad("actors/trainer/trainer_kind.cpp", "actors/trainer/trainer_core.hpp"));
  EXPECT_FALSE(bad("actors/lib/eval/evaluation.cpp", "actors/lib/serving/engine.hpp"));
  EXPECT_FALSE(bad("actors/rollout/rollout_kind.cpp", "milesrt/rollout.capnp.h"));
  EXPECT_FALSE(bad("runtime/graph/loader.hpp", "milesrt/graph.capnp.h"));
}

/// Words of the LLM layers and of the built-in kinds, which runtime/ must not use (any case, as a
/// word or a part of a snake_case name): the runtime is a generic actor-graph engine.
const std::regex kLlmWords(
    R"((?:^|[^A-Za-z0-9])(llm|llms|tokens?|tokenizers?|prompts?|rollouts?|rewards?|log-?probs?|logits?|grpo|ppo|sft|)"
    R"(qwen|llama|safetensors|vocab|vocabulary|decoder|kv|trainers?|chat|transformers?|attention|)"
    R"(publishers?|critic|group_filter|math_reward|remote_reward)(?:[^A-Za-z0-9]|$))",
    std::regex::icase);

TEST(House, RuntimeNamesNoLlmConcept) {
  std::vector<std::string> problems;
  for (const auto& e : fs::recursive_directory_iterator(root / "runtime")) {
    if (!e.is_regular_file()) continue;
    const auto rel = fs::relative(e.path(), root);
    std::ifstream in(e.path());
    std::string text;
    int n = 0;
    while (std::getline(in, text)) {
      ++n;
      std::smatch m;
      if (std::regex_search(text, m, kLlmWords)) {
        problems.push_back(rel.string() + ":" + std::to_string(n) + ": '" + m[1].str() +
                           "' in: " + text);
      }
    }
  }
  std::string all;
  for (const auto& p : problems) all += p + "\n";
  EXPECT_TRUE(problems.empty()) << "runtime/ uses LLM words:\n" << all;
}

TEST(House, TheWordCheckCatchesLlmWords) {
  for (const char* line : {"// a rollout engine", "int tokens = 0;", "LLM core", "the KV cache",
                           "trainer_kind", "log-probs of", "a Reward"}) {
    EXPECT_TRUE(std::regex_search(std::string(line), kLlmWords)) << line;
  }
  for (const char* line : {"a learner's version", "the source emits items", "staleness policy"}) {
    EXPECT_FALSE(std::regex_search(std::string(line), kLlmWords)) << line;
  }
}

/// The imports a runtime-owned schema may name: Cap'n Proto's own, the runtime's param.capnp, and
/// for graph.capnp the params union of the kinds the app registers (kinds.capnp, by name only).
const std::map<std::string, std::set<std::string>> kRuntimeSchemaImports = {
    {"graph.capnp", {"/capnp/c++.capnp", "/milesrt/kinds.capnp", "/milesrt/param.capnp"}},
    {"param.capnp", {"/capnp/c++.capnp"}},
};

/// What is wrong with one line of a runtime-owned schema, or "".
std::string judge_schema_line(const std::string& schema, const std::string& text) {
  static const std::regex imp(R"re(import\s+"([^"]+)")re");
  std::smatch m;
  const std::string code = text.substr(0, text.find('#'));  // comments may show a graph's import
  if (std::regex_search(code, m, imp) && kRuntimeSchemaImports.at(schema).count(m[1].str()) == 0) {
    return "imports " + m[1].str();
  }
  if (std::regex_search(text, m, kLlmWords)) return "names '" + m[1].str() + "'";
  return "";
}

TEST(House, TheGenericGraphSchemaImportsNoKind) {
  std::vector<std::string> problems;
  for (const auto& entry : kRuntimeSchemaImports) {
    const std::string& schema = entry.first;
    std::ifstream in(root / "schemas" / schema);
    ASSERT_TRUE(in) << "schemas/" << schema;
    std::string text;
    int n = 0;
    while (std::getline(in, text)) {
      ++n;
      auto why = judge_schema_line(schema, text);
      if (!why.empty())
        problems.push_back("schemas/" + schema + ":" + std::to_string(n) + ": " + why);
    }
  }
  std::string all;
  for (const auto& p : problems) all += p + "\n";
  EXPECT_TRUE(problems.empty()) << "graph.capnp must name no built-in kind:\n" << all;

  // The rule itself, on made-up lines.
  EXPECT_NE(
      judge_schema_line("graph.capnp", "  x @7 :import \"/milesrt/rollout.capnp\".RolloutParams;"),
      "");
  EXPECT_NE(judge_schema_line("graph.capnp", "  trainer @8 :Void;"), "");
  EXPECT_NE(judge_schema_line("graph.capnp", "# the trainer's params"), "");
  EXPECT_EQ(judge_schema_line("graph.capnp", "#   using import \"/milesrt/graph.capnp\".Graph;"),
            "");
  EXPECT_NE(judge_schema_line("param.capnp", "using import \"/milesrt/kinds.capnp\".Params;"), "");
  EXPECT_EQ(
      judge_schema_line("graph.capnp", "  params @4 :import \"/milesrt/kinds.capnp\".Params;"), "");
}

/// The product's own sources (runtime/, actors/, app/), tests left out.
std::vector<fs::path> product_sources() {
  std::vector<fs::path> out;
  for (const char* folder : {"runtime", "actors", "app"}) {
    for (const auto& p : sources_under(folder)) {
      if (p.string().find(".test.") == std::string::npos) out.push_back(p);
    }
  }
  return out;
}

constexpr int kMaxFileLines = 800;
constexpr int kMaxFunctionLines = 120;

TEST(House, NoSourceFileIsOver800Lines) {
  std::string over;
  for (const auto& p : product_sources()) {
    std::ifstream in(root / p);
    int lines = 0;
    for (std::string l; std::getline(in, l);) ++lines;
    if (lines > kMaxFileLines) over += p.string() + ": " + std::to_string(lines) + " lines\n";
  }
  EXPECT_TRUE(over.empty()) << "split these by job (at most " << kMaxFileLines << " lines):\n"
                            << over;
}

/// Functions longer than kMaxFunctionLines, as lizard (a C/C++ code-metrics tool, PyPI) measures
/// them: "path:line: name (N lines)".
std::vector<std::string> long_functions(const std::vector<fs::path>& files) {
  const fs::path list =
      fs::temp_directory_path() / ("milesrt_house_" + std::to_string(::getpid()) + ".txt");
  {
    std::ofstream out(list);
    for (const auto& f : files) out << (root / f).string() << "\n";
  }
  const std::string cmd =
      std::string(MILESRT_PYTHON) + " -m lizard -l cpp --csv -f " + list.string() + " 2>&1";
  std::vector<std::string> over;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return {"cannot run: " + cmd};
  std::string text;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, pipe)) text.append(buf, n);
  const int rc = ::pclose(pipe);
  fs::remove(list);
  if (rc != 0) return {"lizard failed (" + cmd + "): " + text.substr(0, 500)};
  // CSV: NLOC, CCN, tokens, params, length, "location", "file", "name", "long name", start, end
  std::istringstream lines(text);
  size_t rows = 0;
  for (std::string l; std::getline(lines, l);) {
    std::vector<std::string> f;
    std::string cell;
    bool quoted = false;
    for (char c : l) {
      if (c == '"') {
        quoted = !quoted;
      } else if (c == ',' && !quoted) {
        f.push_back(cell);
        cell.clear();
      } else {
        cell += c;
      }
    }
    f.push_back(cell);
    if (f.size() < 11) continue;
    ++rows;
    const int length = std::atoi(f[4].c_str());
    if (length > kMaxFunctionLines) {
      over.push_back(fs::relative(f[6], root).string() + ":" + f[9] + ": " + f[7] + " (" +
                     std::to_string(length) + " lines)");
    }
  }
  if (rows == 0) return {"lizard measured no function: " + text.substr(0, 500)};
  return over;
}

TEST(House, NoFunctionIsOver120Lines) {
  const auto over = long_functions(product_sources());
  std::string all;
  for (const auto& o : over) all += o + "\n";
  EXPECT_TRUE(over.empty()) << "split these into named steps (at most " << kMaxFunctionLines
                            << " lines):\n"
                            << all;
}

/// Files of runtime/ and actors/ that write to a terminal for the user rather than log: the
/// progress bar and line, the run's closing summary line, and the command-line frame's output.
const std::set<std::string> kUserOutput = {"runtime/core/progress.cpp",
                                           "runtime/metrics/metrics_writer.cpp",
                                           "runtime/driver/run.cpp", "runtime/cli/supervisor.cpp"};

/// Where a line of `text` writes to a stream by hand (fprintf, printf, puts, std::cerr/cout):
/// "path:line: the line"; snprintf (formatting into a buffer) is not writing.
std::vector<std::string> hand_written_output(const fs::path& file, const std::string& text) {
  static const std::regex writes(
      R"((^|[^a-z_])(std::)?(fprintf|printf|puts|fputs)\s*\(|std::(cerr|cout|clog)\b)");
  std::vector<std::string> out;
  std::istringstream lines(text);
  int n = 0;
  for (std::string l; std::getline(lines, l);) {
    ++n;
    const auto t = l.find_first_not_of(' ');
    if (t != std::string::npos && l.compare(t, 2, "//") == 0) continue;
    if (std::regex_search(l, writes))
      out.push_back(file.string() + ":" + std::to_string(n) + ": " + l);
  }
  return out;
}

TEST(House, RuntimeAndActorsLogThroughTheLogger) {
  std::string found;
  for (const char* folder : {"runtime", "actors"}) {
    for (const auto& p : sources_under(folder)) {
      if (p.string().find(".test.") != std::string::npos || kUserOutput.count(p.string())) continue;
      if (p.string().find("runtime/cli/") == 0) continue;  // the commands' own output
      std::ifstream in(root / p);
      std::stringstream text;
      text << in.rdbuf();
      for (const auto& line : hand_written_output(p, text.str())) found += line + "\n";
    }
  }
  EXPECT_TRUE(found.empty()) << "log with milesrt::log (runtime/core/log.hpp) instead:\n" << found;
}

TEST(House, TheOutputCheckCatchesAHandWrittenLine) {
  EXPECT_EQ(hand_written_output("x.cpp", "  std::fprintf(stderr, \"x\");\n").size(), 1u);
  EXPECT_EQ(hand_written_output("x.cpp", "  std::cerr << 1;\n").size(), 1u);
  EXPECT_EQ(hand_written_output("x.cpp", "  printf(\"%d\", 1);\n").size(), 1u);
  EXPECT_TRUE(hand_written_output("x.cpp", "  std::snprintf(buf, 8, \"%g\", x);\n").empty());
  EXPECT_TRUE(hand_written_output("x.cpp", "  // std::fprintf(stderr, \"x\");\n").empty());
}

TEST(House, TheLengthChecksCatchALongFunction) {
  // A made-up source with one function of 131 lines (signature to closing brace) and one of 11.
  const fs::path dir =
      fs::temp_directory_path() / ("milesrt_house_long_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    std::ofstream out(dir / "long.cpp");
    out << "int too_long(int x) {\n";
    for (int i = 0; i < 128; ++i) out << "  x += " << i << ";\n";
    out << "  return x;\n}\n\nint short_one(int x) {\n";
    for (int i = 0; i < 8; ++i) out << "  x -= " << i << ";\n";
    out << "  return x;\n}\n";
  }
  const auto over = long_functions({fs::relative(dir / "long.cpp", root)});
  fs::remove_all(dir);
  ASSERT_EQ(over.size(), 1u) << (over.empty() ? "" : over[0]);
  EXPECT_NE(over[0].find("too_long (131 lines)"), std::string::npos) << over[0];
}

}  // namespace
