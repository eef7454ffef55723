// Every graph a README shows is a graph milesrt accepts: each ```capnp block that defines
// `const graph` in README.md and examples/*/README.md is written out and checked with
// `milesrt validate` (other capnp blocks are fragments of a graph). The custom-reward README shows
// its graph file verbatim.

#include <gtest/gtest.h>

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

TEST(readme_graphs, every_graph_a_readme_shows_validates) {
  const fs::path src = source_dir();
  std::vector<fs::path> readmes = {src / "README.md"};
  for (const auto& e : fs::directory_iterator(src / "examples"))
    if (fs::exists(e.path() / "README.md")) readmes.push_back(e.path() / "README.md");
  // Graphs name files relative to where milesrt runs (the arithmetic example's runs/arith/...):
  // validate them in a folder that has those files, made the way the example makes them.
  const fs::path cwd = scratch("readme-graphs-cwd");
  const fs::path setup = cwd / "runs" / "arith" / "setup";
  if (!fs::exists(setup / "rl.jsonl")) {
    ASSERT_EQ(make_arith_setup(setup, 16, 16, 4), 0);
    fs::copy(setup / "model", cwd / "runs" / "arith" / "sft_model", fs::copy_options::recursive);
  }
  int graphs = 0;
  for (const auto& readme : readmes) {
    int n = 0;
    for (const auto& block : capnp_blocks(slurp(readme))) {
      ++n;
      if (block.find("const graph") == std::string::npos) continue;  // a fragment
      fs::path file = scratch("readme-graphs") / (readme.parent_path().filename().string() + "-" +
                                                   std::to_string(n) + ".capnp");
      std::ofstream(file) << block;
      const fs::path log = scratch("readme-validate") / "out.txt";
      const std::string cmd = "cd '" + cwd.string() + "' && '" + exe() + "' validate '" + file.string() + "' > '" +
                              log.string() + "' 2>&1";
      const int status = std::system(cmd.c_str());
      EXPECT_EQ(status, 0) << readme << " block " << n << ":\n" << block << "\n" << slurp(log);
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
