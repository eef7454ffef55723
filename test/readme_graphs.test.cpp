// Every graph the documentation shows is a graph milesrt accepts: each ```capnp block that defines
// `const graph` in README.md, docs/**/*.md and examples/*/README.md is written out and checked with
// `milesrt validate` (other capnp blocks are fragments of a graph). The README's graph is
// graphs/grpo_sync.capnp (its comments and spacing aside), and the custom-reward README shows its
// graph file verbatim. Every graph shipped in graphs/ and examples/ validates with --schema-only
// from an empty folder, names no absolute path, and says in its description what makes its inputs.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "test/support/arith_setup.hpp"

namespace {
using namespace milesrt::testing;

std::vector<std::string> capnp_blocks(const std::string& markdown) {
  std::vector<std::string> out;
  const std::string open = "```capnp\n", close = "```";
  size_t at = 0;
  while ((at = markdown.find(open, at)) != std::string::npos) {
    const size_t start = at + open.size();
    const size_t end = markdown.find("\n" + close, start);
    if (end == std::string::npos) break;
    out.push_back(markdown.substr(start, end + 1 - start));
    at = end + 1 + close.size();
  }
  return out;
}

std::vector<std::string> graph_blocks(const std::string& markdown) {
  std::vector<std::string> out;
  for (auto& b : capnp_blocks(markdown))
    if (b.find("const graph") != std::string::npos) out.push_back(b);
  return out;
}

/// The Markdown files whose graphs are checked: README.md, every .md under docs/ (sorted, so the
/// order and the scratch names do not depend on the file system), examples/*/README.md.
std::vector<fs::path> markdown_files(const fs::path& src) {
  std::vector<fs::path> files = {src / "README.md"};
  std::vector<fs::path> docs;
  if (fs::is_directory(src / "docs"))
    for (const auto& e : fs::recursive_directory_iterator(src / "docs"))
      if (e.is_regular_file() && e.path().extension() == ".md") docs.push_back(e.path());
  std::sort(docs.begin(), docs.end());
  files.insert(files.end(), docs.begin(), docs.end());
  std::vector<fs::path> examples;
  for (const auto& e : fs::directory_iterator(src / "examples"))
    if (fs::exists(e.path() / "README.md")) examples.push_back(e.path() / "README.md");
  std::sort(examples.begin(), examples.end());
  files.insert(files.end(), examples.begin(), examples.end());
  return files;
}

/// A file name for block n of `file`: its path in the tree with '/' as '-' (docs-design-x.md-3).
std::string scratch_name(const fs::path& src, const fs::path& file, int n) {
  std::string rel = fs::relative(file, src).string();
  std::replace(rel.begin(), rel.end(), '/', '-');
  return rel + "-" + std::to_string(n) + ".capnp";
}

/// Cap'n Proto text without its comments and without whitespace outside string literals: two
/// graphs that differ only in comments and layout compare equal.
std::string without_comments_and_spacing(const std::string& text) {
  std::string out;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) {
        out += text[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
    } else if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
      out += c;
    }
  }
  return out;
}

TEST(ReadmeGraphs, EveryGraphTheDocsShowValidates) {
  const fs::path src = source_dir();
  // Graphs name files relative to where milesrt runs (the arithmetic example's runs/arith/...):
  // validate them in a folder that has those files, made the way the example makes them.
  const fs::path cwd = scratch("readme-graphs-cwd");
  const fs::path setup = cwd / "runs" / "arith" / "setup";
  if (!fs::exists(setup / "rl.jsonl")) {
    ASSERT_EQ(make_arith_setup(setup, 16, 16, 4), 0);
    fs::copy(setup / "model", cwd / "runs" / "arith" / "sft_model", fs::copy_options::recursive);
  }
  int graphs = 0, in_docs = 0;
  for (const auto& md : markdown_files(src)) {
    int n = 0;
    for (const auto& block : capnp_blocks(slurp(md))) {
      ++n;
      if (block.find("const graph") == std::string::npos) continue;  // a fragment
      fs::path file = scratch("readme-graphs") / scratch_name(src, md, n);
      std::ofstream(file) << block;
      const fs::path log = scratch("readme-validate") / "out.txt";
      const std::string cmd = "cd '" + cwd.string() + "' && '" + exe() + "' validate '" +
                              file.string() + "' > '" + log.string() + "' 2>&1";
      const int status = std::system(cmd.c_str());
      EXPECT_EQ(status, 0) << md << " block " << n << ":\n" << block << "\n" << slurp(log);
      ++graphs;
      if (fs::relative(md, src).begin()->string() == "docs") ++in_docs;
    }
  }
  EXPECT_GE(graphs, 3)
      << "README.md's, docs/graph-files.md's and examples/custom_reward's graphs at least";
  EXPECT_GE(in_docs, 1) << "docs/graph-files.md shows a whole graph";
}

TEST(ReadmeGraphs, TheReadmeShowsTheGrpoSyncGraph) {
  const fs::path src = source_dir();
  auto blocks = graph_blocks(slurp(src / "README.md"));
  ASSERT_FALSE(blocks.empty()) << "README.md shows no graph";
  EXPECT_EQ(without_comments_and_spacing(blocks[0]),
            without_comments_and_spacing(slurp(src / "graphs" / "grpo_sync.capnp")))
      << "README.md's graph is not graphs/grpo_sync.capnp: update the one or the other";
}

TEST(ReadmeGraphs, CommentsAndSpacingDoNotCountButStringsDo) {
  EXPECT_EQ(without_comments_and_spacing("a = \"x y\",  # one\n  b = 1,\n"), "a=\"x y\",b=1,");
  EXPECT_EQ(without_comments_and_spacing("s = \"a # not a comment\""), "s=\"a # not a comment\"");
  EXPECT_EQ(without_comments_and_spacing("s = \"q\\\" # still in\" # out"),
            "s=\"q\\\" # still in\"");
  EXPECT_NE(without_comments_and_spacing("s = \"a b\""),
            without_comments_and_spacing("s = \"ab\""));
}

TEST(ReadmeGraphs, TheCustomRewardReadmeShowsItsGraphFile) {
  const fs::path dir = fs::path(source_dir()) / "examples" / "custom_reward";
  auto blocks = capnp_blocks(slurp(dir / "README.md"));
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0], slurp(dir / "grpo_length.capnp"));
}

/// The graph files shipped in graphs/ and examples/*/, sorted.
std::vector<fs::path> shipped_graphs(const fs::path& src) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(src / "graphs"))
    if (e.path().extension() == ".capnp") out.push_back(e.path());
  for (const auto& d : fs::directory_iterator(src / "examples"))
    if (d.is_directory())
      for (const auto& e : fs::directory_iterator(d.path()))
        if (e.path().extension() == ".capnp") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// On a fresh clone nothing a graph names exists yet (models, datasets): `validate --schema-only`
// checks every shipped graph's schema, structure and params without them, from an empty folder.
TEST(ShippedGraphs, EachValidatesWithSchemaOnlyFromAnEmptyFolder) {
  const fs::path src = source_dir();
  const fs::path cwd = scratch("shipped-graphs-empty");
  int n = 0;
  for (const auto& g : shipped_graphs(src)) {
    const fs::path log = scratch("shipped-graphs") / "out.txt";
    const std::string cmd = "cd '" + cwd.string() + "' && '" + exe() +
                            "' validate --schema-only '" + g.string() + "' > '" + log.string() +
                            "' 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << g << "\n" << slurp(log);
    EXPECT_NE(slurp(log).find("the files it names were not read"), std::string::npos) << g;
    ++n;
  }
  EXPECT_GE(n, 13 + 7) << "graphs/ holds 13 graphs, examples/ 7 at least";
  // Without the flag the same folder fails: the files are read.
  const fs::path log = scratch("shipped-graphs") / "full.txt";
  const std::string cmd = "cd '" + cwd.string() + "' && '" + exe() + "' validate '" +
                          (src / "graphs" / "grpo_sync.capnp").string() + "' > '" + log.string() +
                          "' 2>&1";
  EXPECT_NE(std::system(cmd.c_str()), 0) << slurp(log);
  EXPECT_NE(slurp(log).find("runs/arith/"), std::string::npos) << slurp(log);
}

// A shipped graph names no absolute path (a fresh clone has none of them), and its description
// says which README step or script makes the files it names under runs/.
TEST(ShippedGraphs, NameNoAbsolutePathAndSayWhatMakesTheirInputs) {
  for (const auto& g : shipped_graphs(source_dir())) {
    const std::string text = slurp(g);
    for (size_t at = text.find("= \"/"); at != std::string::npos; at = text.find("= \"/", at + 1))
      ADD_FAILURE() << g << ": an absolute path: " << text.substr(at, text.find('\n', at) - at);
    // The examples' plugin graphs (shown verbatim in their READMEs) may go without a description.
    const bool shipped = g.parent_path().filename() == "graphs";
    const size_t d = text.find("description = \"");
    if (text.find("\"runs/") == std::string::npos || (d == std::string::npos && !shipped)) continue;
    ASSERT_NE(d, std::string::npos) << g << " names files under runs/ but has no description";
    const std::string description = text.substr(d, text.find('\n', d) - d);
    EXPECT_NE(description.find("(inputs: "), std::string::npos)
        << g << ": the description does not say what makes its inputs: " << description;
  }
}

}  // namespace
