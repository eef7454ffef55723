// Every graph a README shows is a graph milesrt accepts: each ```capnp block that defines
// `const graph` in README.md and examples/*/README.md is written out and checked with
// `milesrt validate` (other capnp blocks are fragments of a graph). The custom-reward README shows
// its graph file verbatim.

#include <gtest/gtest.h>

#include <regex>

#include "test/support.hpp"

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

TEST(readme_graphs, every_graph_a_readme_shows_validates) {
  const fs::path src = source_dir();
  std::vector<fs::path> readmes = {src / "README.md"};
  for (const auto& e : fs::directory_iterator(src / "examples"))
    if (fs::exists(e.path() / "README.md")) readmes.push_back(e.path() / "README.md");
  int graphs = 0;
  for (const auto& readme : readmes) {
    int n = 0;
    for (const auto& block : capnp_blocks(slurp(readme))) {
      ++n;
      if (block.find("const graph") == std::string::npos) continue;  // a fragment
      fs::path file = scratch("readme-graphs") / (readme.parent_path().filename().string() + "-" +
                                                   std::to_string(n) + ".capnp");
      std::ofstream(file) << block;
      auto r = run_milesrt("validate '" + file.string() + "'", "readme-validate");
      EXPECT_EQ(r.status, 0) << readme << " block " << n << ":\n" << block << "\n" << r.out << r.err;
      ++graphs;
    }
  }
  EXPECT_GE(graphs, 2) << "README.md's and examples/custom_reward's graphs at least";
}

TEST(readme_graphs, the_custom_reward_readme_shows_its_graph_file) {
  const fs::path dir = fs::path(source_dir()) / "examples" / "custom_reward";
  auto blocks = capnp_blocks(slurp(dir / "README.md"));
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0], slurp(dir / "grpo_length.capnp"));
}

}  // namespace
