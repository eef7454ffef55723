// Renamed graph fields end to end: a graph file written with an old name is refused with
// "field X was renamed Y"; `milesrt upgrade` rewrites only the old names (in the struct the rename
// table names, never in comments or strings) and the file then validates; an upgraded file is left
// as it is; a removed field is named with what to write instead, and the file is not touched.

#include <gtest/gtest.h>

#include "test/support.hpp"

namespace {
using namespace milesrt::testing;

/// graphs/agent_env.capnp with a comment that names old fields (which must stay as they are) and
/// the publisher's fullCopyInterval set: the text an upgrade must give back, byte for byte.
std::string upgraded_text() {
  std::string text = slurp(fs::path(source_dir()) / "graphs" / "agent_env.capnp");
  const std::string actors = "  actors = [\n";
  text.insert(text.find(actors),
              "  # groupSize = 8, evalEvery = 10: the old names, in a comment that stays.\n");
  const std::string publisher = "(transport = colocated)";
  text.replace(text.find(publisher), publisher.size(),
               "(transport = colocated, fullCopyInterval = 0)");
  return text;
}

/// The same graph as written before the renames.
std::string old_text() {
  std::string text = upgraded_text();
  for (auto [from, to] : {std::pair{"samplesPerPrompt = 8", "groupSize = 8"},
                          std::pair{"evalInterval = 10", "evalEvery = 10"},
                          std::pair{"fullCopyInterval = 0", "fullEvery = 0"}}) {
    const size_t at = text.find(from);
    if (at != std::string::npos) text.replace(at, std::string(from).size(), to);
  }
  return text;
}

TEST(Upgrade, AnOldGraphIsRefusedWithTheRenameAndUpgradeMakesItLoad) {
  const fs::path dir = scratch("upgrade-old");
  const fs::path file = dir / "agent_env_old.capnp";
  std::ofstream(file) << old_text();
  ASSERT_NE(old_text(), upgraded_text());

  auto v = run_milesrt("validate --schema-only '" + file.string() + "'", "upgrade-validate-old");
  EXPECT_EQ(v.status, 2) << v.out << v.err;
  EXPECT_NE(v.err.find("field groupSize was renamed samplesPerPrompt (`milesrt upgrade " +
                       file.string() + "` rewrites the file)"),
            std::string::npos)
      << v.err;
  EXPECT_NE(v.err.find(file.string() + ":"), std::string::npos) << v.err;

  auto u = run_milesrt("upgrade '" + file.string() + "'", "upgrade-run");
  ASSERT_EQ(u.status, 0) << u.out << u.err;
  for (const char* change :
       {": groupSize -> samplesPerPrompt (EnvironmentParams)",
        ": evalEvery -> evalInterval (EnvironmentParams)",
        ": fullEvery -> fullCopyInterval (PublisherParams)", ": upgraded (3 field(s) renamed)"})
    EXPECT_NE(u.out.find(change), std::string::npos) << change << "\n" << u.out;
  // Only the names changed: comments, layout and the rollout's own samplesPerPrompt are as they
  // were.
  EXPECT_EQ(slurp(file), upgraded_text());

  v = run_milesrt("validate --schema-only '" + file.string() + "'", "upgrade-validate-new");
  EXPECT_EQ(v.status, 0) << v.err;

  // Upgraded already: nothing to do, the file unchanged.
  u = run_milesrt("upgrade '" + file.string() + "'", "upgrade-again");
  EXPECT_EQ(u.status, 0) << u.err;
  EXPECT_NE(u.out.find("nothing to upgrade"), std::string::npos) << u.out;
  EXPECT_EQ(slurp(file), upgraded_text());
  // No temporary file is left beside it.
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1);
}

TEST(Upgrade, ARemovedFieldIsNamedWithWhatToWriteAndTheFileIsLeftAlone) {
  const fs::path file = scratch("upgrade-removed") / "removed.capnp";
  std::string text = upgraded_text();
  const std::string estimator = "estimator = \"grpo\",";
  text.replace(text.find(estimator), estimator.size(), "stdNormalize = false,");
  std::ofstream(file) << text;

  auto v = run_milesrt("validate --schema-only '" + file.string() + "'", "upgrade-removed-v");
  EXPECT_EQ(v.status, 2);
  EXPECT_NE(v.err.find("field stdNormalize was removed: for stdNormalize = false write estimator "
                       "= \"dr_grpo\""),
            std::string::npos)
      << v.err;
  auto u = run_milesrt("upgrade '" + file.string() + "'", "upgrade-removed-u");
  EXPECT_EQ(u.status, 2);
  EXPECT_NE(u.err.find("stdNormalize was removed"), std::string::npos) << u.err;
  EXPECT_EQ(slurp(file), text);
}

TEST(Upgrade, AFileThatDoesNotLoadIsLeftAlone) {
  const fs::path file = scratch("upgrade-broken") / "broken.capnp";
  const std::string text = old_text() + "\nconst broken :Text = ;\n";
  std::ofstream(file) << text;
  auto u = run_milesrt("upgrade '" + file.string() + "'", "upgrade-broken-u");
  EXPECT_EQ(u.status, 2) << u.out;
  EXPECT_NE(u.err.find("does not load; unchanged"), std::string::npos) << u.err;
  EXPECT_EQ(slurp(file), text);
}

}  // namespace
